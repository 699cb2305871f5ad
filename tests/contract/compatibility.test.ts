// docs/compatibility.md lists every XRPC method the pinned AppView serves, with the test that
// compares it through two AppViews (one on each dataplane). This test keeps the table honest:
// it fails when the AppView gains (or loses) a method the table does not list, and when a row
// names a test that does not exist or does not mention the method.
import { existsSync, readFileSync } from 'node:fs'
import path from 'node:path'
import { pathToFileURL } from 'node:url'
import { describe, expect, it } from 'vitest'
import { stockPackageDir } from '../../scripts/stock-contract.ts'

const root = path.resolve(import.meta.dirname, '../..')

interface Registered {
  nsid: string
  type: string
}

/**
 * The methods the AppView registers: its own `API(server, ctx)` (what BskyAppView.create calls),
 * given a server that records each `add` and a context whose every member is a stand-in. No
 * handler runs and nothing connects.
 */
async function appViewMethods(): Promise<Registered[]> {
  const dir = await stockPackageDir()
  const api = (await import(pathToFileURL(path.join(dir, 'dist/api/index.js')).href)) as {
    default: (server: unknown, ctx: unknown) => void
  }
  const standIn = (): unknown =>
    new Proxy(function () {}, {
      get: (_t, k) => (k === 'then' ? undefined : standIn()),
      apply: () => standIn(),
    })
  const methods: Registered[] = []
  const server = new Proxy(
    {},
    {
      get(_t, k) {
        if (k !== 'add') {
          // Another way to register would be missed: fail loudly instead.
          throw new Error(`the AppView's API used server.${String(k)}: teach this test about it`)
        }
        return (ns: { $nsid?: string; main?: { nsid?: string; type?: string } }) => {
          const nsid = ns.$nsid ?? ns.main?.nsid
          if (!nsid) throw new Error('a registration without an NSID')
          methods.push({ nsid, type: ns.main?.type ?? 'unknown' })
        }
      },
    },
  )
  api.default(server, standIn())
  return methods
}

interface Row {
  nsid: string
  tests: string[]
  status: string
}

/** The endpoint table: `| \`nsid\` | reads the dataplane | covered by | status |`. */
function compatibilityTable(): Row[] {
  const text = readFileSync(path.join(root, 'docs/compatibility.md'), 'utf8')
  const rows: Row[] = []
  for (const line of text.split('\n')) {
    const m = /^\|\s*`([a-z]+(?:\.[a-zA-Z0-9]+)+)`\s*\|([^|]*)\|([^|]*)\|([^|]*)\|\s*$/.exec(line)
    if (!m) continue
    rows.push({
      nsid: m[1]!,
      tests: [...m[3]!.matchAll(/`(tests\/[^`]+\.ts)`/g)].map((t) => t[1]!),
      status: m[4]!.trim(),
    })
  }
  return rows
}

describe('docs/compatibility.md', () => {
  it('lists exactly the XRPC methods the pinned AppView serves', async () => {
    const served = (await appViewMethods()).map((m) => m.nsid).sort()
    // The stand-ins really saw the registrations (0.0.280 registers 100).
    expect(served.length).toBeGreaterThan(90)
    const listed = compatibilityTable().map((r) => r.nsid)
    expect(new Set(listed).size).toBe(listed.length)
    expect([...listed].sort()).toEqual(served)
  })

  it('names, for every endpoint, a test that exists and calls it', () => {
    for (const row of compatibilityTable()) {
      expect({ nsid: row.nsid, tests: row.tests.length > 0 }).toEqual({
        nsid: row.nsid,
        tests: true,
      })
      for (const file of row.tests) {
        const full = path.join(root, file)
        expect({ nsid: row.nsid, file, exists: existsSync(full) }).toEqual({
          nsid: row.nsid,
          file,
          exists: true,
        })
        expect({
          nsid: row.nsid,
          file,
          mentions: readFileSync(full, 'utf8').includes(row.nsid),
        }).toEqual({ nsid: row.nsid, file, mentions: true })
      }
      expect(row.status, row.nsid).not.toBe('')
    }
  })
})
