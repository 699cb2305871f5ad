// Upgrading the pinned AppView, tried on a synthetic newer @atproto/bsky: a copy of the pinned
// package with an rpc added and one dropped, a field added to a request, and a stock migration
// past the pinned one. `pnpm contract:diff` must name each change, and nothing else.
import { execFileSync } from 'node:child_process'
import { cpSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { PINNED_STOCK_MIGRATION } from '@openplane/db'
import { migrationsAfter, upgradeReport } from '../../scripts/contract-upgrade.ts'
import { stockPackageDir } from '../../scripts/stock-contract.ts'
import { uniqueName } from '../harness/env.ts'

const root = path.resolve(import.meta.dirname, '../..')
const MIGRATIONS = 'dist/data-plane/server/db/migrations'
const VERSION = '0.0.999-synthetic'

describe('pnpm contract:diff on a synthetic newer @atproto/bsky', () => {
  // Under the repository, where the package's generated code finds @bufbuild/protobuf.
  const scratch = path.join(root, '.data', uniqueName('contract_upgrade'))
  const dir = path.join(scratch, 'package')

  beforeAll(async () => {
    const pinned = await stockPackageDir()
    mkdirSync(path.join(dir, 'dist/proto'), { recursive: true })
    const pkg = JSON.parse(readFileSync(path.join(pinned, 'package.json'), 'utf8')) as object
    writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ ...pkg, version: VERSION }))
    const edit = (file: string, from: string, to: string) => {
      const source = readFileSync(path.join(pinned, file), 'utf8')
      if (!source.includes(from)) throw new Error(`${file} no longer holds ${from}`)
      // Without its source map comment: the map is not copied.
      const edited = source.replace(from, to).replace(/\n\/\/# sourceMappingURL=.*\n?$/, '\n')
      writeFileSync(path.join(dir, file), edited)
    }
    // An rpc added, Ping dropped.
    edit(
      'dist/proto/bsky_connect.js',
      'methods: {',
      `methods: {
        getSyntheticThings: { name: "GetSyntheticThings", I: PingRequest, O: PingResponse, kind: MethodKind.Unary },`,
    )
    const connect = path.join(dir, 'dist/proto/bsky_connect.js')
    writeFileSync(connect, readFileSync(connect, 'utf8').replace(/\n\s*ping: \{[^}]*\},/, ''))
    // A field added to GetTimelineRequest.
    edit(
      'dist/proto/bsky_pb.js',
      `static { this.typeName = "bsky.GetTimelineRequest"; }
    static { this.fields = proto3.util.newFieldList(() => [`,
      `static { this.typeName = "bsky.GetTimelineRequest"; }
    static { this.fields = proto3.util.newFieldList(() => [
        { no: 99, name: "synthetic_only_media", kind: "scalar", T: 8 /* ScalarType.BOOL */ },`,
    )
    // The stock's migrations, and one past the pinned.
    cpSync(path.join(pinned, MIGRATIONS), path.join(dir, MIGRATIONS), { recursive: true })
    writeFileSync(
      path.join(dir, MIGRATIONS, '20261201T000000000Z-synthetic-things.js'),
      `export async function up(db) {
  await db.schema.createTable('synthetic_thing').addColumn('uri', 'varchar', (col) => col.primaryKey()).execute()
  await db.schema.alterTable('post').addColumn('syntheticCount', 'integer').execute()
}
export async function down(db) {
  await db.schema.dropTable('synthetic_thing').execute()
}
`,
    )
  })
  afterAll(() => rmSync(scratch, { recursive: true, force: true }))

  it('names the new and dropped rpcs, the new field and the new migration, nothing else', async () => {
    const report = await upgradeReport(dir)
    expect(report.version).toBe(VERSION)
    expect(report.contract.sort()).toEqual([
      `bsky.GetTimelineRequest.synthetic_only_media (#99): only in ${VERSION}`,
      `rpc GetSyntheticThings: only in ${VERSION}`,
      `rpc Ping: not in ${VERSION}`,
    ])
    expect(report.migrations).toEqual([
      {
        name: '_20261201T000000000Z',
        file: '20261201T000000000Z-synthetic-things.js',
        creates: ['synthetic_thing'],
        alters: ['post'],
      },
    ])
  })

  it('finds no migration past the pinned one in the pinned package, and the pinned is its last', async () => {
    const pinned = await stockPackageDir()
    expect(migrationsAfter(pinned, PINNED_STOCK_MIGRATION)).toEqual([])
    expect(migrationsAfter(pinned, '_20260827T200000000Z').map((m) => m.name)).toEqual([
      PINNED_STOCK_MIGRATION,
    ])
  })

  it('prints the report from the command line', () => {
    const out = execFileSync(
      process.execPath,
      [path.join(root, 'scripts/contract-upgrade.ts'), dir],
      {
        cwd: root,
        encoding: 'utf8',
      },
    )
    expect(out).toContain(`@atproto/bsky ${VERSION} against the contract openplane implements:`)
    expect(out).toContain(`contract: rpc GetSyntheticThings: only in ${VERSION}`)
    expect(out).toContain(
      'migration _20261201T000000000Z (20261201T000000000Z-synthetic-things.js): creates synthetic_thing, alters post',
    )
  })
})
