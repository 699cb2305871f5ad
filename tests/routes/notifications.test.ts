// Notifications, differentially: listing (priority or not, walked with the stock's ISO cursors),
// seen state and unread counts before and after writes through either dataplane, preferences.
import { Timestamp } from '@bufbuild/protobuf'
import { Code } from '@connectrpc/connect'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startOurServer, type OurServer } from '../harness/ours.ts'
import { createUser, seedBasic } from '../harness/seed.ts'
import {
  startStockNetwork,
  type DataplaneClient,
  type StockNetwork,
} from '../harness/stock-network.ts'
import { didsOf, differ, json, WALK_LIMITS, type Differ } from './diff.ts'

const MISSING_DID = 'did:plc:aaaaaaaaaaaaaaaaaaaaaaaa'

describe('notification routes', () => {
  let net: StockNetwork
  let ours: OurServer
  let client: DataplaneClient
  let d: Differ
  let dids: Record<string, string>

  beforeAll(async () => {
    net = await startStockNetwork()
    dids = await seedBasic(net.sc)
    for (const name of ['eve', 'fred']) dids[name] = await createUser(net.sc, name)
    await seedNotifications(net, dids)
    await net.network.processAll()
    ours = await startOurServer({
      schema: net.schema,
      plcUrl: net.network.plc.url,
      pdsUrl: net.network.pds.url,
    })
    client = net.clientFor(ours.server.url)
    d = differ(client, net.stock)
  })
  afterAll(async () => {
    await ours?.close()
    await net?.close()
  })

  const actors = () => [...Object.values(dids), MISSING_DID]

  it('GetNotifications: every actor, priority or not, walked at several limits', async () => {
    let total = 0
    for (const actorDid of actors()) {
      for (const priority of [false, true]) {
        for (const limit of WALK_LIMITS) {
          const pages = await d.walk(
            `notifs ${actorDid} p=${priority} limit ${limit}`,
            (c, cursor) => c.getNotifications({ actorDid, priority, limit, cursor }),
          )
          if (limit === 50 && !priority)
            total += pages.reduce((n, p) => n + p.notifications.length, 0)
        }
      }
    }
    expect(total).toBeGreaterThan(40)
  })

  it('GetNotifications: the AppView first page (a bare ISO cursor) and priority flags', async () => {
    const now = new Date().toISOString()
    const page = await d.same('first page', (c) =>
      c.getNotifications({ actorDid: dids.alice!, limit: 30, cursor: now }),
    )
    expect(page.notifications.some((n) => n.priority)).toBe(true)
    expect(page.notifications.some((n) => !n.priority)).toBe(true)
    const old = '2000-01-01T00:00:00.000Z'
    await d.same('old cursor', (c) =>
      c.getNotifications({ actorDid: dids.alice!, limit: 30, cursor: old }),
    )
    for (const cursor of ['not a date', '2024-01-01__x']) {
      await d.bothReject(
        `cursor ${cursor}`,
        (c) => c.getNotifications({ actorDid: dids.alice!, limit: 5, cursor }),
        Code.InvalidArgument,
      )
    }
  })

  it('GetNotificationSeen / GetUnreadNotificationCount before anything is seen', async () => {
    for (const actorDid of actors()) {
      await d.same(`seen ${actorDid}`, (c) => c.getNotificationSeen({ actorDid }))
      await d.same(`unread ${actorDid}`, (c) => c.getUnreadNotificationCount({ actorDid }))
    }
  })

  it('UpdateNotificationSeen through ours moves seen forward only; both read it back', async () => {
    const actorDid = dids.alice!
    const all = await client.getNotifications({ actorDid, limit: 100 })
    const middle = all.notifications[Math.floor(all.notifications.length / 2)]!.timestamp!
    await client.updateNotificationSeen({ actorDid, timestamp: middle })
    const seen = await d.same('seen after', (c) => c.getNotificationSeen({ actorDid }))
    expect(seen.timestamp?.toDate().toISOString()).toBe(middle.toDate().toISOString())
    const unread = await d.same('unread after', (c) => c.getUnreadNotificationCount({ actorDid }))
    expect(unread.count).toBeGreaterThan(0)
    expect(unread.count).toBeLessThan(all.notifications.length)
    // An older time does not move it back; no timestamp is a no-op.
    await client.updateNotificationSeen({ actorDid, timestamp: Timestamp.fromDate(new Date(0)) })
    await client.updateNotificationSeen({ actorDid })
    const again = await d.same('seen kept', (c) => c.getNotificationSeen({ actorDid }))
    expect(json(again)).toEqual(json(seen))
  })

  it('UpdateNotificationSeen through either dataplane writes the same state', async () => {
    const at = Timestamp.fromDate(new Date(Date.now() - 60_000))
    const later = Timestamp.fromDate(new Date())
    await client.updateNotificationSeen({ actorDid: dids.bob!, timestamp: at })
    await net.stock.updateNotificationSeen({ actorDid: dids.carol!, timestamp: at })
    await client.updateNotificationSeen({ actorDid: dids.bob!, timestamp: later })
    await net.stock.updateNotificationSeen({ actorDid: dids.carol!, timestamp: later })
    const bob = await d.same('bob seen', (c) => c.getNotificationSeen({ actorDid: dids.bob! }))
    const carol = await d.same('carol seen', (c) =>
      c.getNotificationSeen({ actorDid: dids.carol! }),
    )
    expect(json(bob)).toEqual(json(carol))
    for (const actorDid of [dids.bob!, dids.carol!]) {
      const unread = await d.same(`unread ${actorDid}`, (c) =>
        c.getUnreadNotificationCount({ actorDid }),
      )
      expect(unread.count).toBe(0)
    }
  })

  it('GetUnreadNotificationCount leaves out taken-down records and recipients', async () => {
    const actorDid = dids.dan!
    const before = await d.same('before', (c) => c.getUnreadNotificationCount({ actorDid }))
    const notifs = await client.getNotifications({ actorDid, limit: 100 })
    await client.takedownRecord({ recordUri: notifs.notifications[0]!.uri, ref: 'x' })
    const after = await d.same('after record', (c) => c.getUnreadNotificationCount({ actorDid }))
    expect(after.count).toBe(before.count - 1)
    await client.takedownActor({ did: actorDid })
    const gone = await d.same('after actor', (c) => c.getUnreadNotificationCount({ actorDid }))
    expect(gone.count).toBe(0)
    await client.untakedownActor({ did: actorDid })
    await client.untakedownRecord({ recordUri: notifs.notifications[0]!.uri })
  })

  it('GetNotificationPreferences: stored, default and missing, aligned with the request', async () => {
    const req = { dids: [dids.alice!, MISSING_DID, dids.bob!, dids.alice!, dids.eve!] }
    const res = await d.same('prefs', (c) => c.getNotificationPreferences(req))
    expect(res.preferences).toHaveLength(5)
    expect(res.preferences[0]!.like?.include).toBe(2) // follows
    expect(res.preferences[0]!.verified?.list?.enabled).toBe(false)
    await d.same('none', (c) => c.getNotificationPreferences({ dids: [] }))
  })

  it('GetNotificationPreferences: a stored entry missing preferences reads as defaults', async () => {
    await ours.db.db
      .insertInto('private_data')
      .values({
        actorDid: dids.fred!,
        namespace: 'app.bsky.notification.defs#preferences',
        key: 'self',
        payload: JSON.stringify({ like: { include: 'follows', list: false, push: true } }),
        indexedAt: new Date().toISOString(),
        updatedAt: new Date().toISOString(),
      })
      .onConflict((oc) =>
        oc.columns(['actorDid', 'namespace', 'key']).doUpdateSet({ payload: '{}' }),
      )
      .execute()
    // The stock fails on the missing keys; ours fills in the defaults.
    await expect(net.stock.getNotificationPreferences({ dids: [dids.fred!] })).rejects.toThrow()
    const res = await client.getNotificationPreferences({ dids: [dids.fred!] })
    expect(res.preferences[0]!.like?.list?.enabled).toBe(false)
    expect(res.preferences[0]!.follow?.include).toBe(1)
    expect(res.preferences[0]!.verified?.push?.enabled).toBe(true)
  })
})

/** More notifications for alice (likes, replies, follows from accounts she does and does not
 * follow), one whose subject is deleted, and stored preferences for alice. */
async function seedNotifications(net: StockNetwork, dids: Record<string, string>): Promise<void> {
  const sc = net.sc
  const { alice, bob, carol, dan, eve, fred } = didsOf(
    dids,
    'alice',
    'bob',
    'carol',
    'dan',
    'eve',
    'fred',
  )
  const posts = []
  for (let i = 0; i < 6; i++) posts.push((await sc.post(alice, `alice notif ${i}`)).ref)
  for (const [i, post] of posts.entries()) {
    for (const liker of [bob, carol, eve, fred]) await sc.like(liker, post)
    if (i % 2) await sc.reply(eve, post, post, `eve replies ${i}`)
    if (i % 3 === 0) await sc.repost(dan, post)
  }
  await sc.follow(eve, alice)
  await sc.follow(fred, alice)
  await sc.follow(eve, dan)
  await sc.like(eve, sc.posts[dan]![0]!.ref)
  // A like whose subject then disappears: the notification stays, the listing hides it.
  const doomed = (await sc.post(alice, 'doomed')).ref
  await sc.like(bob, doomed)
  await sc.like(eve, doomed)
  await net.network.processAll()
  await sc.deletePost(alice, doomed.uri)

  const headers = await net.network.serviceHeaders(alice, 'app.bsky.notification.putPreferencesV2')
  const res = await fetch(`${net.network.bsky.url}/xrpc/app.bsky.notification.putPreferencesV2`, {
    method: 'POST',
    headers: { ...headers, 'content-type': 'application/json' },
    body: JSON.stringify({
      like: { include: 'follows', list: true, push: false },
      verified: { list: false, push: true },
    }),
  })
  if (!res.ok) throw new Error(`putPreferencesV2: ${res.status} ${await res.text()}`)
}
