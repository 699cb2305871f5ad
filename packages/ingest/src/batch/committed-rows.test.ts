import { describe, expect, it } from 'vitest'
import { CommittedRows } from './committed-rows.ts'

const A = 'did:plc:aaaa'
const B = 'did:plc:bbbb'
const uri = (did: string, n: number) => `at://${did}/app.bsky.feed.post/p${n}`
const row = (did: string, n: number) => ({ uri: uri(did, n), creator: did })

describe('committed rows', () => {
  it('keeps the rows and absences committed parts leave, for the tables the writer alone writes', () => {
    const kept = new CommittedRows(10)
    kept.apply([
      {
        rows: [
          { table: 'post', key: uri(A, 1), row: row(A, 1) },
          { table: 'post', key: uri(A, 2), row: null },
          { table: 'actor', key: A, row: { did: A } },
        ],
      },
    ])
    expect(kept.get('post', uri(A, 1))).toEqual(row(A, 1))
    expect(kept.get('post', uri(A, 2))).toBeNull()
    expect(kept.get('post', uri(A, 3))).toBeUndefined()
    // `actor` is written by the takedown rpcs too: never kept.
    expect(kept.keeps('actor')).toBe(false)
    expect(kept.get('actor', A)).toBeUndefined()
    expect(kept.size).toBe(2)
  })

  it('applies parts in order: a later part wins', () => {
    const kept = new CommittedRows(10)
    kept.apply([
      { rows: [{ table: 'post', key: 'k', row: { uri: 'k', cid: 'a' } }] },
      { rows: [{ table: 'post', key: 'k', row: null }] },
    ])
    expect(kept.get('post', 'k')).toBeNull()
  })

  it('drops the least recently used key past its bound', () => {
    const kept = new CommittedRows(2)
    kept.apply([
      {
        rows: [
          { table: 'post', key: uri(A, 1), row: row(A, 1) },
          { table: 'post', key: uri(A, 2), row: row(A, 2) },
        ],
      },
    ])
    // Read: now the most recently used.
    kept.get('post', uri(A, 1))
    kept.apply([{ rows: [{ table: 'post', key: uri(A, 3), row: row(A, 3) }] }])
    expect(kept.size).toBe(2)
    expect(kept.get('post', uri(A, 2))).toBeUndefined()
    expect(kept.get('post', uri(A, 1))).toEqual(row(A, 1))
    expect(kept.get('post', uri(A, 3))).toEqual(row(A, 3))
  })

  it("forgets every key of a deleted account's records, and only those", () => {
    const kept = new CommittedRows(10)
    kept.apply([
      {
        rows: [
          { table: 'post', key: uri(A, 1), row: row(A, 1) },
          { table: 'post', key: uri(A, 2), row: row(A, 2) },
          { table: 'post', key: uri(B, 1), row: row(B, 1) },
          // A DID that starts like A's is another account.
          { table: 'post', key: uri(`${A}x`, 1), row: row(`${A}x`, 1) },
        ],
      },
      { account: A },
    ])
    expect(kept.get('post', uri(A, 1))).toBeUndefined()
    expect(kept.get('post', uri(A, 2))).toBeUndefined()
    expect(kept.get('post', uri(B, 1))).toEqual(row(B, 1))
    expect(kept.get('post', uri(`${A}x`, 1))).toEqual(row(`${A}x`, 1))
  })

  it('keeps nothing with a bound of 0', () => {
    const kept = new CommittedRows(0)
    kept.apply([{ rows: [{ table: 'post', key: uri(A, 1), row: row(A, 1) }] }])
    expect(kept.keeps('post')).toBe(false)
    expect(kept.get('post', uri(A, 1))).toBeUndefined()
    expect(kept.size).toBe(0)
  })
})
