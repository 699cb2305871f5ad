// A community widened to the accounts its members follow, through the writer alone: a follow by
// a member brings the followed account in (queued for a backfill, indexed from the next batch), a
// followed account's own follows widen nothing, an unfollow takes the account out again, and the
// purge removes what was indexed of it. Reopened from the database, the community is the same.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Backfill, BACKFILL_DEFAULTS } from '@openplane/backfill'
import { Community, type CommunityOptions } from '@openplane/community'
import type { Db } from '@openplane/db'
import { createIdentity } from '@openplane/identity'
import type { IngestEvent, Writer } from '@openplane/ingest'
import { openScratchWriter, type ScratchWriter } from '../harness/writer.ts'

const MEMBER = 'did:plc:membermembermembermember'
const X = 'did:plc:followedfollowedfollowed'
const Y = 'did:plc:outsideroutsideroutsider'
const Z = 'did:plc:secondringsecondringsecon'
const CID = 'bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm'
const TIME = '2026-03-01T12:00:00.000Z'

type Commit = Extract<IngestEvent, { type: 'commit' }>
let seq = 0
let rkeys = 0
const commit = (did: string, ops: Commit['ops']): Commit => ({
  type: 'commit',
  seq: ++seq,
  time: TIME,
  did,
  commit: CID,
  rev: `3k${String(seq).padStart(4, '0')}`,
  ops,
})
const post = (text: string): Commit['ops'][number] => ({
  action: 'create',
  collection: 'app.bsky.feed.post',
  rkey: `3post${String(++rkeys).padStart(8, 'a')}`,
  cid: CID,
  record: { $type: 'app.bsky.feed.post', text, createdAt: TIME },
})
const follow = (rkey: string, subject: string): Commit['ops'][number] => ({
  action: 'create',
  collection: 'app.bsky.graph.follow',
  rkey,
  cid: CID,
  record: { $type: 'app.bsky.graph.follow', subject, createdAt: TIME },
})
const unfollow = (rkey: string): Commit['ops'][number] => ({
  action: 'delete',
  collection: 'app.bsky.graph.follow',
  rkey,
})

describe('a community widened to what its members follow', () => {
  let scratch: ScratchWriter
  let db: Db
  let writer: Writer
  let community: Community
  const options: CommunityOptions = { dids: [MEMBER], lists: [], follows: true }
  const texts = async (did: string) =>
    (await db.db.selectFrom('post').select('text').where('creator', '=', did).execute())
      .map((r) => r.text)
      .sort()
  const repoState = async (did: string) =>
    (
      await db.db
        .selectFrom('openplane_repo')
        .select('state')
        .where('did', '=', did)
        .executeTakeFirst()
    )?.state

  beforeAll(async () => {
    scratch = await openScratchWriter('op_commf', async (scratchDb) => {
      community = await Community.open(scratchDb.db, options, true)
      return community
    })
    ;({ db, writer } = scratch)
    writer.onCommitted(community.onCommitted)
  })
  afterAll(async () => {
    await scratch?.close()
  })

  it('asks for the configured members at once', async () => {
    expect(community.accounts()).toEqual([MEMBER])
    expect(await repoState(MEMBER)).toBe('pending')
  })

  it('brings in an account a member follows, from the next batch on', async () => {
    await writer.applyBatch('live', [
      commit(MEMBER, [follow('3kfollowx', X), post('member says hi')]),
      // Skipped: X joined with this batch, and its repo is fetched again for what it missed.
      commit(X, [post('x before')]),
      commit(Y, [post('y outside')]),
    ])
    expect(community.has(X)).toBe(true)
    await writer.applyBatch('live', [commit(X, [post('x after')]), commit(Y, [post('y again')])])
    expect(await texts(MEMBER)).toEqual(['member says hi'])
    expect(await texts(X)).toEqual(['x after'])
    expect(await texts(Y)).toEqual([])
    expect(await repoState(X)).toBe('pending')
  })

  it("widens one step: a followed account's follows bring no one", async () => {
    await writer.applyBatch('live', [commit(X, [follow('3kfollowz', Z)])])
    await writer.applyBatch('live', [commit(Z, [post('z outside')])])
    expect(community.has(Z)).toBe(false)
    expect(await texts(Z)).toEqual([])
  })

  it('takes an account out when no member follows it, and the purge removes it', async () => {
    await writer.applyBatch('live', [commit(MEMBER, [unfollow('3kfollowx')])])
    await writer.applyBatch('live', [commit(X, [post('x gone')])])
    expect(community.has(X)).toBe(false)
    expect(await texts(X)).toEqual(['x after'])

    const reopened = await Community.open(db.db, options, false)
    expect(reopened.accounts()).toEqual([MEMBER])
    expect(await reopened.outsiders()).toEqual([X])
    const backfill = new Backfill({
      ...BACKFILL_DEFAULTS,
      db: db.db,
      writer,
      didDocs: createIdentity({ plcUrl: 'http://127.0.0.1:1' }).idResolver.did,
      scope: reopened,
    })
    await backfill.repos.enqueuePurge([X])
    expect(await backfill.purgeQueued()).toBe(1)
    expect(await texts(X)).toEqual([])
    expect(await reopened.outsiders()).toEqual([])
    expect(await repoState(X)).toBeUndefined()
    // The member's own rows stay.
    expect(await texts(MEMBER)).toEqual(['member says hi'])
  })
})
