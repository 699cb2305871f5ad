// The fold of a bsync page into row changes, on sequences a page can hold that the end-to-end test
// rarely puts in one page: undo and redo of one key, a clear between adds, inserts that collide.
import { describe, expect, it } from 'vitest'
import { Clock, muteChange, planMutes, planOperations, privateOp, Skip } from '@openplane/bsync'
import { Method, MuteOperation, MuteOperation_Type, Operation } from '@openplane/proto/bsync'

const A = 'did:plc:aaaaaaaaaaaaaaaaaaaaaaaa'
const B = 'did:plc:bbbbbbbbbbbbbbbbbbbbbbbb'
const C = 'did:plc:cccccccccccccccccccccccc'
const POST = `at://${B}/app.bsky.feed.post/3kpost`
const LIST = `at://${B}/app.bsky.graph.list/3klist`

const mute = (type: MuteOperation_Type, subject = '', flags: Partial<MuteOperation> = {}) =>
  muteChange(new MuteOperation({ id: '1', type, actorDid: A, subject, ...flags }))

const op = (namespace: string, key: string, method: Method, payload?: unknown) =>
  privateOp(
    new Operation({
      id: '1',
      actorDid: A,
      namespace,
      key,
      method,
      payload: payload === undefined ? new Uint8Array() : Buffer.from(JSON.stringify(payload)),
    }),
  )
const BOOKMARK = 'app.bsky.bookmark.defs#bookmark'
const SUB = 'app.bsky.notification.defs#subjectActivitySubscription'
const DRAFT = 'app.bsky.draft.defs#draftWithId'

describe('bsync mute pages', () => {
  it('a key removed then added again is deleted and inserted afresh; a second add keeps createdAt', () => {
    const plan = planMutes(
      [
        mute(MuteOperation_Type.ADD, B),
        mute(MuteOperation_Type.REMOVE, B),
        mute(MuteOperation_Type.ADD, B, { onlyReposts: true }),
        mute(MuteOperation_Type.ADD, C),
        mute(MuteOperation_Type.ADD, C, { onlyQuoteposts: true }),
      ],
      new Clock(),
    )
    expect([...plan.mute.removed]).toEqual([`${A}\u0000${B}`])
    const b = plan.mute.rows.get(`${A}\u0000${B}`)!
    const c = plan.mute.rows.get(`${A}\u0000${C}`)!
    expect(b.onlyReposts).toBe(true)
    expect(c.onlyQuoteposts).toBe(true)
    // c's createdAt is its first add's, which came after b's last add.
    expect(c.createdAt > b.createdAt).toBe(true)
  })

  it('a clear drops earlier account and list mutes of the actor, not thread mutes or later adds', () => {
    const plan = planMutes(
      [
        mute(MuteOperation_Type.ADD, B),
        mute(MuteOperation_Type.ADD, LIST),
        mute(MuteOperation_Type.ADD, POST),
        mute(MuteOperation_Type.CLEAR),
        mute(MuteOperation_Type.ADD, C),
      ],
      new Clock(),
    )
    expect([...plan.cleared]).toEqual([A])
    expect([...plan.mute.rows.keys()]).toEqual([`${A}\u0000${C}`])
    expect(plan.listMute.rows.size).toBe(0)
    expect([...plan.threadMute.rows.values()].map((r) => r.rootUri)).toEqual([POST])
  })
})

describe('bsync operation pages', () => {
  const empty = { bookmark: [], activitySubscription: [], draft: [] }

  it('refuses inserts into taken slots as the stock does, counting bookmarks from what lands', () => {
    const subject = {
      uri: POST,
      cid: 'bafyreib2rxk3rybk3aobmv5cjuql3bm2twh4jo5uxgf5ix4vkfj7xygbae',
    }
    const plan = planOperations(
      [
        op(BOOKMARK, 'k1', Method.CREATE, { subject }),
        op(BOOKMARK, 'k1', Method.CREATE, { subject }), // same key
        op(BOOKMARK, 'k2', Method.CREATE, { subject }), // same subject, other key
        op(DRAFT, 'd1', Method.UPDATE, { posts: [] }), // nothing to update
      ],
      empty,
      new Clock(),
    )
    expect(plan.refused.map((r) => r.reason)).toEqual(['bookmark exists', 'bookmark exists'])
    expect(plan.bookmark.changes().upserts.map((r) => r.key)).toEqual(['k1'])
    expect(plan.draft.changes()).toEqual({ deletes: [], upserts: [] })
    expect([...plan.bookmarked]).toEqual([POST])
    // private_data keeps every put (the stock writes it before the namespace's table).
    expect(plan.privateData.rows.size).toBe(3)
  })

  it('a loaded row deleted frees its unique slot; an update changes the loaded row', () => {
    const loaded = {
      bookmark: [{ creator: A, key: 'old', subjectUri: POST, subjectCid: 'x', indexedAt: 't' }],
      activitySubscription: [
        { creator: A, key: 's1', subjectDid: B, indexedAt: 't', post: true, reply: false },
      ],
      draft: [],
    }
    const plan = planOperations(
      [
        op(BOOKMARK, 'old', Method.DELETE),
        op(BOOKMARK, 'new', Method.CREATE, { subject: { uri: POST, cid: 'y' } }),
        op(SUB, 's1', Method.UPDATE, {
          subject: B,
          activitySubscription: { post: true, reply: true },
        }),
      ],
      loaded,
      new Clock(),
    )
    expect(plan.refused).toEqual([])
    const b = plan.bookmark.changes()
    expect(b.deletes.map((r) => r.key)).toEqual(['old'])
    expect(b.upserts.map((r) => r.key)).toEqual(['new'])
    expect(plan.activitySubscription.changes().upserts.map((r) => r.reply)).toEqual([true])
  })

  it('skips what does not parse, with the reason', () => {
    const bad: [() => unknown, RegExp][] = [
      [() => op('com.example.nope#x', 'k', Method.CREATE, {}), /unknown namespace/],
      [() => op(BOOKMARK, 'k', Method.CREATE, { subject: { uri: 'nope', cid: 'x' } }), /AT URI/],
      [() => op(SUB, 'k', Method.CREATE, []), /not an object/],
      [() => op(BOOKMARK, 'k', 7 as Method, {}), /unknown method/],
      [() => op(DRAFT, 'k\u0000', Method.CREATE, {}), /NUL/],
      [() => mute(MuteOperation_Type.ADD, 'not a subject'), /AT URI/],
    ]
    for (const [fn, reason] of bad) {
      expect(fn).toThrow(Skip)
      expect(fn).toThrow(reason)
    }
  })
})
