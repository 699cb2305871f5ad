// pnpm new:plugin <nsid> [--name <file-name>] [--stock]: a record type in one command. Writes the
// plugin (record-only: checked and kept in `record`) and its test beside it, registers it, and, for
// a collection the pinned stock indexer indexes too, adds it to the indexer fuzzer. `--stock` says
// the stock indexes it though the pinned release does not (moving the pin to a release that
// does: CONTRIBUTING.md, "Upgrading the pinned AppView"). Prints what is left to do
// (CONTRIBUTING.md, "Adding a record type").
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { format, resolveConfig } from 'prettier'
import {
  fuzzSequence,
  fuzzWeights,
  namesOf,
  pluginSource,
  registered,
  testSource,
} from './plugin-scaffold.ts'

const root = join(import.meta.dirname, '..')
const at = (path: string) => join(root, path)

/** The collections the pinned stock indexer has a plugin for, read from its sources. */
function stockCollections(): Set<string> {
  const dir = at('node_modules/@atproto/bsky/dist/data-plane/server/indexing/plugins')
  const out = new Set<string>()
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.js'))) {
    const found = /schema: ([a-zA-Z0-9.]+)\.main\b/.exec(readFileSync(join(dir, file), 'utf8'))
    if (found) out.add(found[1]!)
  }
  return out
}

async function main(): Promise<void> {
  const { positionals, values } = parseArgs({
    allowPositionals: true,
    options: { name: { type: 'string' }, stock: { type: 'boolean' } },
  })
  if (positionals.length !== 1) {
    throw new Error('usage: pnpm new:plugin <nsid> [--name <file-name>] [--stock]')
  }
  const names = namesOf(positionals[0]!, values.name)
  const { pluginFor } = await import('../packages/plugins/src/registry.ts')
  if (pluginFor(names.nsid)) throw new Error(`${names.nsid} has a plugin already`)
  const { assertRecord, InvalidRecordError } = await import('../packages/plugins/src/lexicon.ts')
  let lexiconKnown = true
  try {
    assertRecord(names.nsid, {})
  } catch (err) {
    lexiconKnown = !(err instanceof InvalidRecordError && /^no lexicon/.test(err.message))
  }

  const plugin = at(`packages/plugins/src/collections/${names.file}.ts`)
  const test = at(`packages/plugins/src/collections/${names.file}.test.ts`)
  for (const path of [plugin, test]) {
    if (existsSync(path)) throw new Error(`${path} exists: choose another --name`)
  }
  const registry = at('packages/plugins/src/registry.ts')
  const edits: [string, string][] = [
    [plugin, pluginSource(names, lexiconKnown)],
    [test, testSource(names)],
    [registry, registered(readFileSync(registry, 'utf8'), names)],
  ]
  const stock = values.stock === true || stockCollections().has(names.nsid)
  if (stock) {
    const sequence = at('tests/harness/fuzz/sequence.ts')
    const generate = at('tests/harness/fuzz/generate.ts')
    edits.push(
      [sequence, fuzzSequence(readFileSync(sequence, 'utf8'), names)],
      [generate, fuzzWeights(readFileSync(generate, 'utf8'), names)],
    )
  }
  // Every edit is made in memory first: a refusal leaves no file half-written.
  for (const [path, text] of edits) {
    const options = { ...(await resolveConfig(path)), filepath: path }
    writeFileSync(path, await format(text, options))
  }

  const rel = (path: string) => path.slice(root.length + 1)
  console.log(`wrote ${edits.map(([path]) => rel(path)).join(', ')}`)
  console.log(`
Left to do (CONTRIBUTING.md, "Adding a record type"):
  - ${rel(test)}: RECORD must be a valid ${names.nsid} record${lexiconKnown ? ' (its lexicon ships with @atproto/api)' : ''}; then pnpm vitest run ${rel(test)}
  - ${lexiconKnown ? 'the plugin checks records against their lexicon already' : 'parse: the lexicon rules of the record, if any beyond its type'}
  - a table of its own, counters, notifications: the plugin's table, toRow and effects, and a migration${stock ? ' (a stock table: the stock schema has it; see CONTRIBUTING.md)' : ''}
${
  stock
    ? `  - the fuzzer (tests/harness/fuzz): the record built for kind '${names.kind}' in sequence.ts needs the fields the stock reads; pnpm fuzz:indexer`
    : `  - the stock indexer does not index ${names.nsid}: the indexer fuzzer leaves it out (its judge is the stock)`
}`)
}

main().catch((err: unknown) => {
  console.error((err as Error).message)
  process.exitCode = 1
})
