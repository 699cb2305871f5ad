// What upgrading the pinned AppView would ask of openplane: a newer @atproto/bsky's dataplane
// contract against the one openplane implements (rpcs, messages and fields new, changed or gone),
// and the stock migrations it has past PINNED_STOCK_MIGRATION, with the tables each creates or
// alters. CONTRIBUTING ("Upgrading the pinned AppView") says what to do with each line.
//   pnpm contract:diff <version>   fetches that @atproto/bsky from the npm registry (npm pack)
//   pnpm contract:diff <dir>       an @atproto/bsky package already unpacked under this repository
import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs'
import path from 'node:path'
import * as ours from '../packages/proto/src/index.ts'
import { PINNED_STOCK_MIGRATION } from '../packages/db/src/migrate.ts'
import { diffContracts } from './contract-diff.ts'
import { loadStockContract } from './stock-contract.ts'

const root = path.resolve(import.meta.dirname, '..')
/** Where the package's stock migrations are, inside it. */
const MIGRATIONS = 'dist/data-plane/server/db/migrations'

export interface StockMigration {
  /** As kysely names it: `_` and the file's timestamp. */
  name: string
  file: string
  creates: string[]
  alters: string[]
}

export interface UpgradeReport {
  version: string
  /** One line per contract difference, worded from the newer package's side. */
  contract: string[]
  migrations: StockMigration[]
}

/** The upgrade to the @atproto/bsky package at `dir`, against what openplane implements now. */
export async function upgradeReport(dir: string): Promise<UpgradeReport> {
  const newer = await loadStockContract('bsky', dir)
  // Ours equals the pinned package's (tests/contract/contract.test.ts): its differences from the
  // newer one are the upgrade's.
  const lines = diffContracts(
    { service: newer.service, pb: newer.pb },
    { service: ours.Service as never, pb: ours as unknown as Record<string, unknown> },
  )
  const contract = lines.map((l) =>
    l
      .replace(/: missing$/, `: only in ${newer.version}`)
      .replace(/: not in the stock contract$/, `: not in ${newer.version}`)
      .replace(/ != /, ` (openplane) → `),
  )
  return {
    version: newer.version,
    contract,
    migrations: migrationsAfter(dir, PINNED_STOCK_MIGRATION),
  }
}

/** The package's stock migrations named after `pinned`, in order, with the tables they touch. */
export function migrationsAfter(dir: string, pinned: string): StockMigration[] {
  const at = path.join(dir, MIGRATIONS)
  const out: StockMigration[] = []
  for (const file of readdirSync(at).sort()) {
    const m = /^(\d{8}T\d{9}Z)-.+\.js$/.exec(file)
    if (!m || `_${m[1]}` <= pinned) continue
    const source = readFileSync(path.join(at, file), 'utf8')
    const tables = (verb: string) => [
      ...new Set(
        [...source.matchAll(new RegExp(`\\.${verb}\\(\\s*['"]([\\w.]+)['"]`, 'g'))].map(
          (x) => x[1]!,
        ),
      ),
    ]
    out.push({
      name: `_${m[1]}`,
      file,
      creates: tables('createTable'),
      alters: tables('alterTable'),
    })
  }
  return out
}

export function formatReport(r: UpgradeReport): string {
  const out = [`@atproto/bsky ${r.version} against the contract openplane implements:`]
  if (!r.contract.length) out.push('  contract: the same rpcs, messages and fields')
  for (const line of r.contract) out.push(`  contract: ${line}`)
  if (!r.migrations.length) out.push(`  migrations: none after ${PINNED_STOCK_MIGRATION}`)
  for (const m of r.migrations) {
    const touches = [
      ...m.creates.map((t) => `creates ${t}`),
      ...m.alters.map((t) => `alters ${t}`),
    ].join(', ')
    out.push(`  migration ${m.name} (${m.file}): ${touches || 'no table created or altered'}`)
  }
  return out.join('\n')
}

/** An @atproto/bsky version fetched and unpacked under .data (node resolves its imports here). */
function fetched(version: string): string {
  const dir = path.join(root, '.data/contract', version)
  const pkg = path.join(dir, 'package')
  if (existsSync(path.join(pkg, 'package.json'))) return pkg
  mkdirSync(dir, { recursive: true })
  const tgz = execFileSync('npm', ['pack', `@atproto/bsky@${version}`, '--silent'], {
    cwd: dir,
    encoding: 'utf8',
  }).trim()
  execFileSync('tar', ['-xzf', tgz], { cwd: dir })
  return pkg
}

if (process.argv[1] === import.meta.filename) {
  const arg = process.argv[2]
  if (!arg) {
    console.error('usage: pnpm contract:diff <@atproto/bsky version | unpacked package directory>')
    process.exit(2)
  }
  const dir = existsSync(arg) ? path.resolve(arg) : fetched(arg)
  console.log(formatReport(await upgradeReport(dir)))
}
