import { describe, expect, it } from 'vitest'
import { MemoryReader, refAt } from '../memory-reader.ts'
import type { Effects } from '../types.ts'
import { chatDeclaration, germDeclaration, notificationDeclaration, status } from './record-only.ts'

const ALICE = 'did:plc:alicealicealicealicealic'
const CID = 'bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm'
const INDEXED = '2026-03-01T12:00:00.000Z'

/** Every kind of effect, an absent one as empty, so a stray effect fails the comparison. */
const all = (e: Effects) => ({
  rows: e.rows ?? [],
  counters: e.counters ?? [],
  notifications: e.notifications ?? [],
  deleteNotificationsFor: e.deleteNotificationsFor ?? [],
})
const NONE = { rows: [], counters: [], notifications: [], deleteNotificationsFor: [] }

// The stock keeps these in `record` alone, at any rkey (its plugins index nothing, even at
// `self`): no table, no row, no counters, no notifications.
const cases = [
  {
    plugin: chatDeclaration,
    collection: 'chat.bsky.actor.declaration',
    valid: { allowIncoming: 'following' },
  },
  {
    plugin: germDeclaration,
    collection: 'com.germnetwork.declaration',
    valid: { version: '1.0.0', currentKey: new Uint8Array([1, 2, 3]) },
  },
  {
    plugin: notificationDeclaration,
    collection: 'app.bsky.notification.declaration',
    valid: { allowSubscriptions: 'followers' },
  },
  {
    plugin: status,
    collection: 'app.bsky.actor.status',
    valid: { status: 'app.bsky.actor.status#live', createdAt: '2026-03-01T11:00:00.000Z' },
  },
]

describe('record-only collections', () => {
  for (const { plugin, collection, valid } of cases) {
    describe(collection, () => {
      const rec = { $type: collection, ...valid }
      const self = refAt(`at://${ALICE}/${collection}/self`, CID, INDEXED)
      const other = refAt(`at://${ALICE}/${collection}/3kother00001`, CID, INDEXED)

      it('is the collection, with no table of its own', () => {
        expect(plugin.collection).toBe(collection)
        expect(plugin.table).toBeNull()
      })

      it('takes a valid record as it is', () => {
        expect(plugin.parse(rec)).toEqual(rec)
      })

      it('keeps a record at any rkey, and makes no row of it', () => {
        const parsed = plugin.parse(rec)
        expect(() => plugin.check?.(self, parsed)).not.toThrow()
        expect(() => plugin.check?.(other, parsed)).not.toThrow()
        expect(() => plugin.toRow(new MemoryReader(), self, parsed)).toThrow()
      })

      it('has no effects on insert or delete', () => {
        const parsed = plugin.parse(rec)
        const row = {} as never
        expect(all(plugin.onInsert(new MemoryReader(), row, self, parsed))).toEqual(NONE)
        expect(all(plugin.onDelete(new MemoryReader(), row, null))).toEqual(NONE)
      })
    })
  }

  it('keeps a chat declaration its lexicon refuses, as the stock does (it checks none)', () => {
    for (const rec of [
      { $type: 'chat.bsky.actor.declaration' },
      { $type: 'chat.bsky.actor.declaration', allowIncoming: 5 },
    ]) {
      expect(chatDeclaration.parse(rec)).toEqual(rec)
    }
  })

  it('refuses an invalid germ declaration', () => {
    const key = new Uint8Array([1, 2, 3])
    const germ = (extra: object) =>
      germDeclaration.parse({ $type: 'com.germnetwork.declaration', ...extra })
    expect(() => germ({ version: '1.0.0' })).toThrow()
    // Too short a version, and a key as text instead of bytes.
    expect(() => germ({ version: '1.0', currentKey: key })).toThrow()
    expect(() => germ({ version: '1.0.0', currentKey: 'AQID' })).toThrow()
    expect(() =>
      germ({
        version: '1.0.0',
        currentKey: key,
        messageMe: { messageMeUrl: 'not a uri', showButtonTo: 'everyone' },
      }),
    ).toThrow()
  })

  it('refuses an invalid notification declaration', () => {
    const decl = (extra: object) =>
      notificationDeclaration.parse({ $type: 'app.bsky.notification.declaration', ...extra })
    expect(() => decl({})).toThrow()
    expect(() => decl({ allowSubscriptions: 5 })).toThrow()
    // Known values are a hint, not a rule.
    expect(() => decl({ allowSubscriptions: 'whoever' })).not.toThrow()
  })

  it('refuses an invalid status', () => {
    const st = (extra: object) =>
      status.parse({
        $type: 'app.bsky.actor.status',
        status: 'app.bsky.actor.status#live',
        createdAt: '2026-03-01T11:00:00.000Z',
        ...extra,
      })
    expect(() =>
      status.parse({ $type: 'app.bsky.actor.status', status: 'app.bsky.actor.status#live' }),
    ).toThrow()
    expect(() => st({ durationMinutes: 0 })).toThrow()
    expect(() => st({ createdAt: 'yesterday' })).toThrow()
    expect(() => st({ status: 'anything', durationMinutes: 30 })).not.toThrow()
  })
})
