// A sequence as TypeScript source: one event per line, ready to paste into a regression test
// (see tests/indexer/fuzz-regressions.test.ts for the shape).
import type { BatchDifference } from './run.ts'
import type { FuzzEvent } from './sequence.ts'

function literal(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(literal).join(', ')}]`
  if (v && typeof v === 'object') {
    const entries = Object.entries(v).filter(([, x]) => x !== undefined)
    return `{ ${entries.map(([k, x]) => `${/^[a-zA-Z_]\w*$/.test(k) ? k : JSON.stringify(k)}: ${literal(x)}`).join(', ')} }`
  }
  if (typeof v === 'string') return `'${v.replaceAll('\\', '\\\\').replaceAll("'", "\\'")}'`
  return String(v)
}

export function formatSequence(seq: FuzzEvent[], indent = '  '): string {
  return `[\n${seq.map((e) => `${indent}${literal(e)},`).join('\n')}\n]`
}

/** A whole regression test for a shrunk sequence. */
export function formatRegression(
  name: string,
  seq: FuzzEvent[],
  diffs: BatchDifference[],
  seed?: number,
): string {
  const sizes = [...new Set(diffs.map((d) => d.batchSize))]
  const why = diffs
    .slice(0, 3)
    .map((d) => `// batch size ${d.batchSize}, ${d.kind}: ${d.detail.split('\n')[0]}`)
    .join('\n')
  return [
    seed === undefined ? '' : `// Found by the indexer fuzzer, seed ${seed}.`,
    why,
    `it('${name}', async () => {`,
    `  await expectSameAsStock(${formatSequence(seq, '    ').replace(/\]$/, '  ]')}, { batchSizes: [${[1, 500, ...sizes.filter((s) => s !== 1 && s !== 500)].join(', ')}] })`,
    `})`,
  ]
    .filter(Boolean)
    .join('\n')
}
