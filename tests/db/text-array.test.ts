// Postgres reads textArray's literals back as the same elements, on the server and embedded.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { sql } from 'kysely'
import { afterAll, describe, expect, it } from 'vitest'
import { createPgDb, createPgliteDb, textArray, type Db } from '@openplane/db'
import { PG_URL } from '../harness/env.ts'

const values = [
  'did:plc:abc',
  'at://did:plc:abc/app.bsky.feed.post/3k',
  'a"quote',
  'back\\slash',
  'comma, {braces} and spaces',
  'NULL',
  '',
  null,
  'ünïcödé 🦋',
]

async function roundTrip({ db }: Db) {
  // Element by element: the embedded client's own parser of array results reads a NULL element
  // back as the string "NULL", which is not what this test is about.
  const { rows } = await sql<{ v: string | null }>`
    select v from unnest(${textArray(values)}::text[]) with ordinality u(v, i) order by i
  `.execute(db)
  return rows.map((r) => r.v)
}

describe('textArray in Postgres', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'op-text-array-'))
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  it('reads back as the same elements', async () => {
    const db = createPgDb({ url: PG_URL, schema: 'public', poolSize: 1 })
    try {
      expect(await roundTrip(db)).toEqual(values)
    } finally {
      await db.close()
    }
  })

  it('reads back as the same elements on the embedded Postgres', async () => {
    const db = createPgliteDb({ dataDir: dir, schema: 'public' })
    try {
      expect(await roundTrip(db)).toEqual(values)
    } finally {
      await db.close()
    }
  })
})
