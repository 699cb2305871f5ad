// `pnpm new:plugin` end to end, in a copy of the workspace (its packages' links copied as they
// are, the installed dependencies shared through a link to node_modules): a record type
// scaffolded there builds (the whole repo typechecks, the plugin's own test passes), the indexer
// fuzzer draws it, and `openplane start` run from the copy indexes a record of it off a dev-env
// PDS's firehose into `record`, where the same dataplane leaves a record type it has no plugin
// for.
import { execFile } from 'node:child_process'
import { cpSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { promisify, stripVTControlCharacters } from 'node:util'
import { TestNetworkNoAppView } from '@atproto/dev-env'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { PG_URL, uniqueName } from '../harness/env.ts'
import { spawnDataplane, waitForSeq, type Child } from '../harness/processes.ts'
import { createUser } from '../harness/seed.ts'
import { dropSchemas } from '../harness/stock-network.ts'

const root = path.resolve(import.meta.dirname, '../..')
const NSID = 'com.example.feed.note'
const FILE = 'note'
const KIND = 'note'
/** A record type no plugin takes, before or after the scaffold. */
const OTHER = 'com.example.feed.scribble'

const execFileAsync = promisify(execFile)

/**
 * Runs node with `args` in the copy; its output, or an error that carries it. Asynchronous: the
 * typecheck takes most of a minute, which a synchronous child would take from vitest's worker.
 */
async function nodeIn(dir: string, args: string[]): Promise<string> {
  try {
    const { stdout, stderr } = await execFileAsync(process.execPath, args, {
      cwd: dir,
      encoding: 'utf8',
      maxBuffer: 64 << 20,
    })
    // Colours come through when the test run has them: the assertions read the text.
    return stripVTControlCharacters(stdout + stderr)
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string }
    throw new Error(
      `node ${args.join(' ')} failed: ${e.message}\n${e.stdout ?? ''}${e.stderr ?? ''}`,
    )
  }
}

describe('pnpm new:plugin, end to end', () => {
  let copy = ''
  let scaffolded = ''

  beforeAll(async () => {
    copy = mkdtempSync(path.join(tmpdir(), 'openplane-new-plugin-'))
    const skipped = new Set(['node_modules', '.data', '.git'].map((d) => path.join(root, d)))
    cpSync(root, copy, {
      recursive: true,
      verbatimSymlinks: true,
      filter: (src) => !skipped.has(src),
    })
    symlinkSync(path.join(root, 'node_modules'), path.join(copy, 'node_modules'))
    scaffolded = await nodeIn(copy, ['scripts/new-plugin.ts', NSID, '--stock'])
  })

  afterAll(() => {
    if (copy) rmSync(copy, { recursive: true, force: true })
  })

  it('writes the plugin, its test, its registration and its fuzzer kind', () => {
    expect(scaffolded).toContain(`packages/plugins/src/collections/${FILE}.ts`)
    const registry = readFileSync(path.join(copy, 'packages/plugins/src/registry.ts'), 'utf8')
    expect(registry).toContain(`from './collections/${FILE}.ts'`)
    const sequence = readFileSync(path.join(copy, 'tests/harness/fuzz/sequence.ts'), 'utf8')
    expect(sequence).toContain(`${KIND}: '${NSID}'`)
  })

  it('builds: the whole repo typechecks and the plugin passes its own test', async () => {
    await nodeIn(copy, ['node_modules/typescript/bin/tsc', '-p', 'tsconfig.json', '--noEmit'])
    const out = await nodeIn(copy, [
      'node_modules/vitest/vitest.mjs',
      'run',
      '--project',
      'unit',
      `packages/plugins/src/collections/${FILE}.test.ts`,
    ])
    expect(out, out).toMatch(/Tests\s+2 passed/)
  })

  it('is drawn by the indexer fuzzer', async () => {
    // The copy's generator, run in its own process: sequences of the fixed seeds CI runs.
    const script = `
      import { generate } from './tests/harness/fuzz/generate.ts'
      let drawn = 0
      for (let seed = 1; seed <= 50; seed++) {
        for (const e of generate(seed, { length: 200 })) {
          for (const op of 'ops' in e ? e.ops : []) if (op.create === '${KIND}') drawn++
        }
      }
      console.log(JSON.stringify({ drawn }))`
    const out = await nodeIn(copy, ['--input-type=module', '-e', script])
    const drawn = Number(/\{"drawn":(\d+)\}/.exec(out)?.[1])
    expect(drawn).toBeGreaterThan(0)
  })

  describe('indexed off a PDS by the copy', () => {
    let network: TestNetworkNoAppView
    let dataplane: Child | undefined
    const schema = uniqueName('op_new_plugin')

    beforeAll(async () => {
      network = await TestNetworkNoAppView.create({})
    })

    afterAll(async () => {
      await dataplane?.stop()
      await network?.close()
      await dropSchemas([schema])
    })

    it('keeps the new record type in `record`, and not one it has no plugin for', async () => {
      const sc = network.getSeedClient()
      const alice = await createUser(sc as unknown as Parameters<typeof createUser>[0], 'alice')
      const write = async (collection: string) => {
        const res = await sc.agent.com.atproto.repo.createRecord(
          {
            repo: alice,
            collection,
            record: { $type: collection, createdAt: new Date().toISOString() },
          },
          { headers: sc.getHeaders(alice), encoding: 'application/json' },
        )
        return res.data.uri
      }
      const other = await write(OTHER)
      const note = await write(NSID)
      dataplane = await spawnDataplane({
        pgUrl: PG_URL,
        schema,
        plcUrl: network.plc.url,
        pdsUrl: network.pds.url,
        main: path.join(copy, 'packages/cli/src/main.ts'),
        extra: { DATAPLANE_FIREHOSE_CURSOR: '0' },
      })
      await waitForSeq(dataplane.url, (await network.pds.ctx.sequencer.curr()) ?? 0)
      const client = new pg.Client({ connectionString: PG_URL })
      await client.connect()
      try {
        const { rows } = await client.query<{ uri: string }>(
          `select uri from "${schema}".record where uri = any($1::text[]) order by uri`,
          [[note, other]],
        )
        expect(rows.map((r) => r.uri)).toEqual([note])
      } finally {
        await client.end()
      }
    })
  })
})
