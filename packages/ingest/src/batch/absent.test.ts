import { describe, expect, it } from 'vitest'
import type { CommitOp, IngestEvent } from '../events.ts'
import { absentBefore } from './absent.ts'
import type { SchemaInfo, TableInfo } from './schema.ts'
import { BatchState } from './state.ts'

const A = 'did:plc:aaaaaaaaaaaaaaaaaaaaaaaa'
const B = 'did:plc:bbbbbbbbbbbbbbbbbbbbbbbb'
const TIME = '2026-03-01T12:00:00.000Z'
let seq = 0

const op = (rkey: string, marks: Partial<CommitOp> = {}): CommitOp => ({
  action: 'create',
  collection: 'app.bsky.feed.like',
  rkey,
  ...marks,
})
const commit = (did: string, ops: CommitOp[], firstWrite = false): IngestEvent => ({
  type: 'commit',
  seq: ++seq,
  time: TIME,
  did,
  commit: 'bafy',
  rev: '3k',
  ops,
  ...(firstWrite ? { firstWrite: true as const } : {}),
})
const like = (did: string, rkey: string) => `at://${did}/app.bsky.feed.like/${rkey}`

describe('absentBefore: what a backfill marks as not in the index', () => {
  it('knows the URIs of marked creates only', () => {
    const batch = [
      commit(A, [
        op('a1', { unseen: true }),
        op('a2'),
        op('a3', { unseen: true, action: 'update' }),
      ]),
    ]
    const absent = absentBefore(batch, 0, 1)!
    expect(absent.has('like', ['uri'], [like(A, 'a1')])).toBe(true)
    expect(absent.has('like', ['uri'], [like(A, 'a2')])).toBe(false)
    expect(absent.has('like', ['uri'], [like(A, 'a3')])).toBe(false)
    // Keyed by the record in a column of a longer key; and the record's own row.
    expect(absent.has('record', ['uri'], [like(A, 'a1')])).toBe(true)
    expect(absent.has('post_embed_image', ['postUri', 'position'], [like(A, 'a1'), 0])).toBe(true)
    // Rows that outlive the record, or that others write, are read as ever.
    for (const table of ['quote', 'op_thread_reply', 'post_agg', 'starter_pack']) {
      expect(absent.has(table, ['uri'], [like(A, 'a1')])).toBe(false)
    }
    // Creators are unknown without a first write.
    expect(absent.has('like', ['creator', 'subject'], [A, 'at://x'])).toBe(false)
  })

  it('knows a first write’s creator unless an earlier range wrote its repo', () => {
    const batch = [commit(B, [op('b1')]), commit(A, [op('a1')], true), commit(B, [op('b2')], true)]
    const whole = absentBefore(batch, 0, 3)!
    expect(whole.has('like', ['creator', 'subject'], [A, 'at://x'])).toBe(true)
    expect(whole.has('follow', ['creator', 'subjectDid'], [A, B])).toBe(true)
    // B's first range is [0, 1): the range [1, 3) comes after something of B was written.
    const later = absentBefore(batch, 1, 3)!
    expect(later.has('like', ['creator', 'subject'], [A, 'at://x'])).toBe(true)
    expect(later.has('like', ['creator', 'subject'], [B, 'at://x'])).toBe(false)
    // Counters and mutes are others' rows.
    expect(whole.has('profile_agg', ['did'], [A])).toBe(false)
    expect(whole.has('thread_mute', ['mutedByDid', 'rootUri'], [A, 'at://x'])).toBe(false)
  })

  it('is nothing for unmarked events', () => {
    expect(absentBefore([commit(A, [op('a1')])], 0, 1)).toBeUndefined()
  })
})

const table = (columns: string[], primary: string[], unique: string[][] = []): TableInfo => ({
  columns,
  types: new Map(columns.map((c) => [c, 'varchar'])),
  json: new Set(),
  generated: new Map(),
  primary,
  unique,
  nullable: new Set(),
})
const schema: SchemaInfo = new Map([
  ['like', table(['uri', 'creator', 'subject'], ['uri'], [['creator', 'subject']])],
  ['quote', table(['uri', 'subject'], ['uri'])],
])

describe('BatchState with rows known absent', () => {
  // The state never loads here: its database is never reached.
  const noDatabase = undefined as never

  it('answers their reads and writes without a miss, and plans them as inserts', () => {
    const absent = absentBefore([commit(A, [op('a1', { unseen: true })], true)], 0, 1)
    const state = new BatchState(noDatabase, schema, undefined, absent)
    const row = { uri: like(A, 'a1'), creator: A, subject: 'at://x' }
    expect(state.insertIfFree('like', row)).toEqual(row)
    expect(state.rows('like', { creator: A, subject: 'at://y' })).toEqual([])
    expect(state.pending).toBe(false)
    expect(state.missCount).toBe(0)
    expect(state.writes().get('like')).toEqual({ deleted: [], inserted: [row], replaced: [] })
    // A duplicate in the batch is still found, in the batch's own rows.
    expect(state.first('like', { creator: A, subject: 'at://x' })).toEqual(row)
  })

  it('still misses what it cannot know', () => {
    const absent = absentBefore([commit(A, [op('a1', { unseen: true })])], 0, 1)
    const state = new BatchState(noDatabase, schema, undefined, absent)
    expect(state.rows('quote', { uri: like(A, 'a1') })).toEqual([])
    expect(state.rows('like', { creator: A, subject: 'at://x' })).toEqual([])
    expect(state.rows('like', { uri: like(B, 'b1') })).toEqual([])
    expect(state.missCount).toBe(3)
    expect(state.pending).toBe(true)
  })
})
