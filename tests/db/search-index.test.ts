// The post search index is built where the dataplane runs: concurrently on Postgres (valid, and
// left alone once it is), the plain way on the embedded Postgres (where a concurrent build leaves
// it invalid); an invalid index an interrupted build left is dropped and built again.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { sql } from 'kysely'
import { afterAll, describe, expect, it } from 'vitest'
import {
  buildPostSearchIndex,
  createPgDb,
  createPgliteDb,
  migrateToLatest,
  postSearchIndexState,
} from '@openplane/db'
import { PG_URL, uniqueName } from '../harness/env.ts'
import { dropSchemas } from '../harness/stock-network.ts'

describe('post search index', () => {
  const schema = uniqueName('op_search_idx')
  const dir = mkdtempSync(path.join(tmpdir(), 'op-search-idx-'))
  afterAll(async () => {
    await dropSchemas([schema])
    rmSync(dir, { recursive: true, force: true })
  })

  it('is built concurrently on Postgres, and an interrupted build is redone', async () => {
    const db = createPgDb({ url: PG_URL, schema, poolSize: 1 })
    try {
      await migrateToLatest(db)
      expect(await postSearchIndexState(db)).toBe('absent')
      expect(await buildPostSearchIndex(db)).toBe('built')
      expect(await postSearchIndexState(db)).toBe('valid')
      expect(await buildPostSearchIndex(db)).toBe('present')
      // What a cancelled concurrent build leaves: the index marked invalid.
      await sql`update pg_catalog.pg_index set indisvalid = false
        where indexrelid = ${`${schema}.post_text_search_idx`}::regclass`.execute(db.db)
      expect(await postSearchIndexState(db)).toBe('building')
      expect(await buildPostSearchIndex(db)).toBe('built')
      expect(await postSearchIndexState(db)).toBe('valid')
    } finally {
      await db.close()
    }
  })

  it('is built the plain way, and valid, on the embedded Postgres', async () => {
    const db = await createPgliteDb({ dataDir: dir, schema: 'bsky' })
    try {
      await migrateToLatest(db)
      expect(await buildPostSearchIndex(db, { concurrently: false })).toBe('built')
      expect(await postSearchIndexState(db)).toBe('valid')
    } finally {
      await db.close()
    }
  })
})
