// A labeler that misbehaves and moves: bad signatures refused, a key rotated in its DID document
// followed, a negation that arrives before its label, expiry, and labels on subjects nothing has
// indexed. The labeler is tests/harness/fake-labeler.ts on a test PLC; openplane reads it as it
// would any labeler, and its GetLabels is what the AppView would be served.
import { BasicHostList, createDataPlaneClient } from '@atproto/bsky'
import { TestPlc } from '@atproto/dev-env'
import { Secp256k1Keypair } from '@atproto/crypto'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { PG_URL, uniqueName } from '../harness/env.ts'
import { startFakeLabeler, type FakeLabeler } from '../harness/fake-labeler.ts'
import { startFakeRelay, type FakeRelay } from '../harness/fake-relay.ts'
import { spawnDataplane, type Child } from '../harness/processes.ts'
import { dropSchemas } from '../harness/stock-network.ts'

const SUBJECT = 'at://did:plc:notindexednotindexednotin/app.bsky.feed.post/3kpost'
const ACCOUNT = 'did:plc:notindexedaccountnotindex'

describe('a labeler: signatures, rotation, negations, expiry', () => {
  let plc: TestPlc
  let relay: FakeRelay
  let labeler: FakeLabeler
  let dataplane: Child
  let admin: pg.Client
  const schema = uniqueName('op_labeler')

  beforeAll(async () => {
    plc = await TestPlc.create({})
    relay = await startFakeRelay([])
    labeler = await startFakeLabeler(plc.url)
    dataplane = await spawnDataplane({
      pgUrl: PG_URL,
      schema,
      plcUrl: plc.url,
      pdsUrl: relay.url.replace(/^ws/, 'http'),
      extra: { DATAPLANE_LABELERS: labeler.did },
    })
    admin = new pg.Client({ connectionString: PG_URL })
    await admin.connect()
  })

  afterAll(async () => {
    await admin?.end()
    await dataplane?.stop()
    await labeler?.close()
    await relay?.close()
    await plc?.close()
    await dropSchemas([schema])
  })

  async function applied(seq: number): Promise<void> {
    const q = new URLSearchParams({ timeoutMs: '30000', labels: `${labeler.did}:${seq}` })
    const res = await fetch(`${dataplane.url}/_wait?${q}`)
    if (!res.ok) throw new Error(`/_wait: ${res.status} ${await res.text()}`)
  }

  /** What GetLabels serves for the subjects (as the AppView asks), as "uri val" pairs. */
  async function served(subjects: string[]): Promise<string[]> {
    const client = createDataPlaneClient(new BasicHostList([dataplane.url]), { httpVersion: '1.1' })
    const res = await client.getLabels({ subjects, issuers: [labeler.did] })
    return res.labels
      .map(
        (b) =>
          JSON.parse(Buffer.from(b).toString('utf8')) as {
            uri: string
            val: string
            neg?: boolean
          },
      )
      .filter((l) => !l.neg)
      .map((l) => `${l.uri} ${l.val}`)
      .sort()
  }

  async function state() {
    const body = (await (await fetch(`${dataplane.url}/_health`)).json()) as {
      dependencies: {
        labelers: { did: string; applied: number; refused: number; connected: boolean }[]
      }
    }
    return body.dependencies.labelers[0]!
  }

  it('stores signed labels, refuses forged ones, keeps a negation that came first', async () => {
    const forger = await Secp256k1Keypair.create()
    const t = (minutes: number) => new Date(Date.UTC(2026, 0, 1, 0, minutes)).toISOString()
    await labeler.emit([{ uri: SUBJECT, val: 'spam', cts: t(1) }])
    await labeler.emit([{ uri: ACCOUNT, val: 'forged', cts: t(2) }], forger)
    // The negation of "rude" (at t4) comes before the label it negates (made at t3).
    await labeler.emit([{ uri: ACCOUNT, val: 'rude', neg: true, cts: t(4) }])
    await labeler.emit([{ uri: ACCOUNT, val: 'rude', cts: t(3) }])
    // Expired, and expiring later.
    const seq = await labeler.emit([
      { uri: SUBJECT, val: 'expired', cts: t(5), exp: new Date(Date.now() - 60_000).toISOString() },
      {
        uri: SUBJECT,
        val: 'expiring',
        cts: t(5),
        exp: new Date(Date.now() + 3_600_000).toISOString(),
      },
    ])
    await applied(seq)
    // Neither subject is indexed: their labels apply all the same.
    expect(await served([SUBJECT, ACCOUNT])).toEqual([`${SUBJECT} expiring`, `${SUBJECT} spam`])
    const s = await state()
    expect(s.refused).toBe(1)
    expect(s.connected).toBe(true)
    await admin.query(`set search_path to "${schema}"`)
    const { rows } = await admin.query(`select val, neg from label where uri = $1 order by val`, [
      ACCOUNT,
    ])
    expect(rows).toEqual([{ val: 'rude', neg: true }])
    const metrics = await (await fetch(`${dataplane.url}/metrics`)).text()
    expect(metrics).toMatch(/openplane_labels_total\{labeler="[^"]+",outcome="bad_signature"\} 1/)
  })

  it('follows a key rotation: labels signed with the new key land, the old key is refused', async () => {
    const old = labeler.key
    await labeler.rotate()
    const t = new Date().toISOString()
    await labeler.emit([{ uri: ACCOUNT, val: 'after-rotation', cts: t }])
    const seq = await labeler.emit([{ uri: ACCOUNT, val: 'old-key', cts: t }], old)
    await applied(seq)
    expect(await served([ACCOUNT])).toEqual([`${ACCOUNT} after-rotation`])
    expect((await state()).refused).toBe(2)
  })

  it('a label newer than its negation applies again', async () => {
    const seq = await labeler.emit([{ uri: ACCOUNT, val: 'rude', cts: new Date().toISOString() }])
    await applied(seq)
    expect(await served([ACCOUNT])).toEqual([`${ACCOUNT} after-rotation`, `${ACCOUNT} rude`])
  })
})
