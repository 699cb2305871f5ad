import { describe, expect, it } from 'vitest'
import type { IngestEvent } from './events.ts'
import { messageOf } from './publish.ts'

const did = 'did:plc:alice'
const time = '2024-09-05T06:11:04.870Z'
const commit: Extract<IngestEvent, { type: 'commit' }> = {
  type: 'commit',
  seq: 7,
  time,
  did,
  commit: 'bafyreicommit',
  rev: '3l3qo2vutsw2b',
  ops: [],
}

describe('published messages', () => {
  it('renders a create with its record JSON as checked where it was decoded', () => {
    const json = '{"$type":"app.bsky.feed.post","text":"hi \\"there\\"","createdAt":"x"}'
    const op = {
      action: 'create' as const,
      collection: 'app.bsky.feed.post',
      rkey: '3l3qo2vuowo2b',
      cid: 'bafyreirecord',
      record: {},
      checked: { json },
    }
    const m = messageOf({ kind: 'commit', evt: commit, op }, 1725911162329308)
    expect(m.collection).toBe('app.bsky.feed.post')
    expect(JSON.parse(m.message)).toEqual({
      did,
      time_us: 1725911162329308,
      kind: 'commit',
      commit: {
        rev: '3l3qo2vutsw2b',
        operation: 'create',
        collection: 'app.bsky.feed.post',
        rkey: '3l3qo2vuowo2b',
        record: JSON.parse(json),
        cid: 'bafyreirecord',
      },
    })
  })

  it('renders a delete without record or cid', () => {
    const op = { action: 'delete' as const, collection: 'app.bsky.feed.like', rkey: 'k' }
    const m = JSON.parse(messageOf({ kind: 'commit', evt: commit, op }, 5).message)
    expect(m.commit).toEqual({
      rev: commit.rev,
      operation: 'delete',
      collection: 'app.bsky.feed.like',
      rkey: 'k',
    })
  })

  it('renders identity (handle when verified) and account events', () => {
    const identity: IngestEvent = { type: 'identity', seq: 8, time, did }
    const withHandle = messageOf({ kind: 'identity', evt: identity, handle: 'a.test' }, 6)
    expect(withHandle.collection).toBeNull()
    expect(JSON.parse(withHandle.message).identity).toEqual({
      did,
      handle: 'a.test',
      seq: 8,
      time,
    })
    const bare = messageOf({ kind: 'identity', evt: identity, handle: undefined }, 6)
    expect(JSON.parse(bare.message).identity).toEqual({ did, seq: 8, time })

    const account: Extract<IngestEvent, { type: 'account' }> = {
      type: 'account',
      seq: 9,
      time,
      did,
      active: false,
      status: 'takendown',
    }
    const taken = JSON.parse(
      messageOf({ kind: 'account', evt: account, deleted: false }, 7).message,
    )
    expect(taken).toEqual({
      did,
      time_us: 7,
      kind: 'account',
      account: { active: false, did, seq: 9, status: 'takendown', time },
    })
    const deleted = JSON.parse(
      messageOf({ kind: 'account', evt: account, deleted: true }, 8).message,
    )
    expect(deleted.account.status).toBe('deleted')
    const active = { ...account, active: true, status: undefined }
    const back = JSON.parse(messageOf({ kind: 'account', evt: active, deleted: false }, 9).message)
    expect(back.account).toEqual({ active: true, did, seq: 9, time })
  })
})
