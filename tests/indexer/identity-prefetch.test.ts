// Identity lookups run ahead of the writer: a decoded event's DID is checked against the actor
// rows in bulk, and only actors the writer would have to verify (new, or stale) are resolved,
// once each, so the writer's own lookup finds the caches warm.
import { createPgDb, migrateToLatest, type Db } from '@openplane/db'
import { IdentityPrefetch, type WriterDeps } from '@openplane/ingest'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { PG_URL, uniqueName } from '../harness/env.ts'
import { dropSchemas } from '../harness/stock-network.ts'

describe('identity prefetch', () => {
  let db: Db
  const schema = uniqueName('op_prefetch')

  beforeAll(async () => {
    db = createPgDb({ url: PG_URL, schema })
    await migrateToLatest(db)
    await db.db
      .insertInto('actor')
      .values([
        // Verified an hour before the events: fresh.
        { did: 'did:plc:fresh', handle: 'fresh.test', indexedAt: '2026-01-05T11:00:00.000Z' },
        // Verified two days before: due for a check.
        { did: 'did:plc:stale', handle: 'stale.test', indexedAt: '2026-01-03T11:00:00.000Z' },
      ])
      .execute()
  })
  afterAll(async () => {
    await db.close()
    await dropSchemas([schema])
  })

  it('resolves new and stale actors once each, ahead of the writer, and skips fresh ones', async () => {
    const asked: string[] = []
    const deps: WriterDeps = {
      resolveHandle: async (did, force) => {
        expect(force).toBe(false)
        asked.push(did)
        return `${did.slice(8)}.test`
      },
      isHosted: async () => true,
    }
    const prefetch = new IdentityPrefetch(db.db, deps, { concurrency: 2 })
    const time = '2026-01-05T12:00:00.000Z'
    for (let round = 0; round < 3; round++) {
      for (const did of ['did:plc:fresh', 'did:plc:stale', 'did:plc:new1', 'did:plc:new2']) {
        prefetch.see(did, time)
      }
      await new Promise((r) => setTimeout(r, 50))
    }
    for (let i = 0; i < 20; i++) prefetch.see(`did:plc:more${i}`, time)
    await new Promise((r) => setTimeout(r, 100))
    prefetch.stop()
    expect(asked.slice(0, 3).sort()).toEqual(['did:plc:new1', 'did:plc:new2', 'did:plc:stale'])
    expect(asked).toHaveLength(23)
    expect(new Set(asked).size).toBe(23)
    expect(asked).not.toContain('did:plc:fresh')
  })
})
