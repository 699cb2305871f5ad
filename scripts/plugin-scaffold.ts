// What `pnpm new:plugin <nsid>` writes: a record-only plugin and its test, its line in the
// registry, and, for a collection the stock indexer also indexes, its entry in the indexer
// fuzzer (whose judge is the stock: a collection it does not index would differ by design).
// Pure text in, text out, so each edit is tested beside it; new-plugin.ts does the files.

/** The names a collection's plugin goes by. */
export interface PluginNames {
  nsid: string
  /** File name in collections/, without `.ts`. */
  file: string
  /** The exported plugin's identifier. */
  ident: string
  /** The fuzzer's short name for the kind. */
  kind: string
}

/** The NSID syntax (atproto.com/specs/nsid): domain authority segments, then a name. */
const NSID =
  /^[a-zA-Z](?:[a-zA-Z0-9-]{0,62}[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,62}[a-zA-Z0-9])?)+(?:\.[a-zA-Z][a-zA-Z0-9]{0,62})$/

export function namesOf(nsid: string, file?: string): PluginNames {
  if (!NSID.test(nsid) || nsid.length > 317) throw new Error(`not an NSID: ${nsid}`)
  const name = nsid.split('.').at(-1)!
  const kebab = file ?? name.replace(/([a-z0-9])([A-Z])/g, '$1-$2').toLowerCase()
  if (!/^[a-z][a-z0-9-]*$/.test(kebab)) throw new Error(`not a file name: ${kebab}`)
  const ident = kebab.replace(/-([a-z0-9])/g, (_, c: string) => c.toUpperCase())
  return { nsid, file: kebab, ident, kind: ident.toLowerCase() }
}

/** The plugin: the record checked and kept in `record`, no table, no effects yet. */
export function pluginSource(n: PluginNames, lexiconKnown: boolean): string {
  const parse = lexiconKnown
    ? `  parse: (record) => assertRecord('${n.nsid}', record),`
    : `  // @atproto/api ships no lexicon for this collection: a record must at least be an object of
  // its own type. Its lexicon's rules belong here (throw InvalidRecordError).
  parse(record) {
    if (!record || typeof record !== 'object' || Array.isArray(record)) {
      throw new InvalidRecordError('invalid ${n.nsid} record: not an object')
    }
    if ((record as { $type?: unknown }).$type !== '${n.nsid}') {
      throw new InvalidRecordError('invalid ${n.nsid} record: $type is not ${n.nsid}')
    }
    return record
  },`
  const imports = lexiconKnown
    ? `import { assertRecord } from '../lexicon.ts'`
    : `import { InvalidRecordError } from '../lexicon.ts'`
  return `// ${n.nsid}
// Records kept in \`record\` (the Get*Records rpcs read them back). A table of their own,
// counters and notifications are effects this plugin returns (see types.ts and
// CONTRIBUTING.md, "Adding a record type").
${imports}
import type { RecordPlugin } from '../types.ts'

export const ${n.ident}: RecordPlugin<unknown, never> = {
  collection: '${n.nsid}',
  table: null,
${parse}
  toRow: () => {
    throw new Error('${n.nsid} has no table')
  },
  onInsert: () => ({}),
  onDelete: () => ({}),
}
`
}

/** Its test, on the in-memory reader: a valid record to be filled in, and what it refuses. */
export function testSource(n: PluginNames): string {
  return `import { describe, expect, it } from 'vitest'
import { MemoryReader, refAt } from '../memory-reader.ts'
import { ${n.ident} } from './${n.file}.ts'

const DID = 'did:plc:aaaaaaaaaaaaaaaaaaaaaaaa'
const CID = 'bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm'
const INDEXED = '2026-03-01T12:00:00.000Z'
const URI = \`at://\${DID}/${n.nsid}/3kaaaaaaaaaa2\`
// A valid record: it holds what the lexicon requires.
const RECORD = { $type: '${n.nsid}', createdAt: '2026-03-01T11:00:00.000Z' }

describe('${n.nsid}', () => {
  it('takes a valid record and refuses what is not one', () => {
    expect(${n.ident}.parse(RECORD)).toEqual(RECORD)
    expect(() => ${n.ident}.parse({ $type: 'app.bsky.feed.like' })).toThrow()
    expect(() => ${n.ident}.parse('text')).toThrow()
  })

  it('keeps the record in \`record\` only, with no effects of its own', () => {
    expect(${n.ident}.table).toBeNull()
    const ref = refAt(URI, CID, INDEXED)
    expect(${n.ident}.onInsert(new MemoryReader(), {} as never, ref, RECORD)).toEqual({})
    expect(${n.ident}.onDelete(new MemoryReader(), {} as never, null)).toEqual({})
  })
})
`
}

/** registry.ts with the plugin imported and listed. */
export function registered(registry: string, n: PluginNames): string {
  if (registry.includes(`'./collections/${n.file}.ts'`)) {
    throw new Error(`registry.ts already imports collections/${n.file}.ts`)
  }
  const lines = registry.split('\n')
  const lastImport = lines.findLastIndex((l) => l.includes("from './collections/"))
  const end = lines.findIndex((l) => l.startsWith('] as AnyPlugin[]'))
  if (lastImport < 0 || end < 0) throw new Error('registry.ts: the plugin list was not found')
  lines.splice(end, 0, `  ${n.ident},`)
  lines.splice(lastImport + 1, 0, `import { ${n.ident} } from './collections/${n.file}.ts'`)
  return lines.join('\n')
}

/** The fuzzer's sequence.ts with the kind's collection and its record (fields to fill in). */
export function fuzzSequence(source: string, n: PluginNames): string {
  const table = source.indexOf('export const COLLECTIONS = {')
  const close = source.indexOf('} as const', table)
  const site = source.indexOf("    case 'site':")
  if (table < 0 || close < 0 || site < 0)
    throw new Error('sequence.ts: COLLECTIONS or build() not found')
  if (new RegExp(`\\n  ${n.kind}: '`).test(source.slice(table, close))) {
    throw new Error(`the fuzzer already has a kind named ${n.kind}`)
  }
  return (
    source.slice(0, close) +
    `  ${n.kind}: '${n.nsid}',\n` +
    source.slice(close, site) +
    `    case '${n.kind}':\n      return { ...base }\n` +
    source.slice(site)
  )
}

/** The fuzzer's generate.ts with the kind among new records, rarely. */
export function fuzzWeights(source: string, n: PluginNames): string {
  const start = source.indexOf('const CREATE_WEIGHTS')
  const end = source.indexOf('\n]', start)
  if (start < 0 || end < 0) throw new Error('generate.ts: CREATE_WEIGHTS not found')
  return source.slice(0, end) + `\n  ['${n.kind}', 0.5],` + source.slice(end)
}
