// `openplane appview` as a newcomer runs it: one process, the dataplane indexing a PDS's firehose
// and the stock AppView in front of it, asked over HTTP for a profile written through the PDS.
// Also the AppView alone against that dataplane (the compose file's `appview` service), a clean
// stop on SIGTERM, the signing key kept across a restart, and settings refused by name.
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { Secp256k1Keypair } from '@atproto/crypto'
import { TestNetworkNoAppView } from '@atproto/dev-env'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  embeddedUrl,
  readAppViewSettings,
  SIGNING_KEY_FILE,
} from '../../packages/cli/src/appview.ts'
import { ConfigError, readConfig } from '../../packages/cli/src/config.ts'
import { PG_URL, uniqueName } from '../harness/env.ts'
import { freePort, spawnReady, waitForSeq, type Child } from '../harness/processes.ts'
import { IMAGES, type Did } from '../harness/seed.ts'
import { dropSchemas } from '../harness/stock-network.ts'

const root = path.resolve(import.meta.dirname, '../..')

interface ProfileView {
  did: string
  handle: string
  displayName?: string
  description?: string
  avatar?: string
}

async function getProfile(appview: string, actor: string): Promise<ProfileView> {
  const res = await fetch(
    `${appview}/xrpc/app.bsky.actor.getProfile?actor=${encodeURIComponent(actor)}`,
  )
  const body = await res.text()
  expect(res.status, body).toBe(200)
  return JSON.parse(body) as ProfileView
}

/** The key the AppView's DID document publishes (did:web serves it at /.well-known/did.json). */
async function publishedKey(appview: string): Promise<string> {
  const res = await fetch(`${appview}/.well-known/did.json`)
  expect(res.status).toBe(200)
  const doc = (await res.json()) as { verificationMethod: { publicKeyMultibase: string }[] }
  return `did:key:${doc.verificationMethod[0]!.publicKeyMultibase}`
}

const refused = (url: string) =>
  fetch(url).then(
    () => false,
    () => true,
  )

describe('openplane appview', () => {
  let network: TestNetworkNoAppView
  const schema = uniqueName('op_appview')
  const dataDir = mkdtempSync(path.join(tmpdir(), 'openplane-appview-'))
  const aloneDir = mkdtempSync(path.join(tmpdir(), 'openplane-appview-alone-'))
  const children: Child[] = []
  let did: Did = 'did:plc:unset'
  let seq = 0
  let dataplanePort = 0
  let appviewPort = 0
  let stack: Child

  const stackEnv = () => ({
    DB_POSTGRES_URL: PG_URL,
    DB_POSTGRES_SCHEMA: schema,
    DATAPLANE_PORT: String(dataplanePort),
    APPVIEW_PORT: String(appviewPort),
    DATAPLANE_DATA_DIR: dataDir,
    DATAPLANE_FIREHOSE_URLS: network.pds.url.replace(/^http/, 'ws'),
    // The account exists before the process starts: index the PDS's stream from its start.
    DATAPLANE_FIREHOSE_CURSOR: '0',
    DATAPLANE_PLC_URL: network.plc.url,
    DATAPLANE_ALLOW_PRIVATE_NETWORK: 'true',
    DATAPLANE_TEST_HANDLE_PDS_URL: network.pds.url,
    DATAPLANE_TIMELINES: 'memory',
    DATAPLANE_BATCH_WAIT_MS: '5',
    // As an operator runs it (vitest sets NODE_ENV=test, which turns on the AppView's debug mode).
    NODE_ENV: 'production',
    LOG_LEVEL: 'info',
  })

  const spawnStack = async () => {
    const child = await spawnReady(
      ['packages/cli/src/main.ts', 'appview'],
      stackEnv(),
      `http://127.0.0.1:${appviewPort}`,
      // The AppView's health pings its dataplane: ready means both are up.
      '/xrpc/_health',
    )
    children.push(child)
    return child
  }

  beforeAll(async () => {
    network = await TestNetworkNoAppView.create({})
    const sc = network.getSeedClient()
    const alice = await sc.createAccount('alice', {
      handle: 'alice.test',
      email: 'alice@test.com',
      password: 'alice-pass',
    })
    did = alice.did
    // dev-env's createProfile reads an image its npm package does not ship; the fixture's instead.
    const avatar = await sc.uploadFile(did, path.join(IMAGES, 'portrait.jpg'), 'image/jpeg')
    await sc.agent.app.bsky.actor.profile.create(
      { repo: did },
      {
        displayName: 'Alice Through The Stack',
        description: 'indexed by openplane',
        avatar: avatar.image,
      },
      sc.getHeaders(did),
    )
    await network.processAll()
    seq = (await network.pds.ctx.sequencer.curr()) ?? 0
    dataplanePort = await freePort()
    appviewPort = await freePort()
    stack = await spawnStack()
  })

  afterAll(async () => {
    for (const c of children) await c.stop('SIGKILL')
    await network?.close()
    await dropSchemas([schema])
    rmSync(dataDir, { recursive: true, force: true })
    rmSync(aloneDir, { recursive: true, force: true })
  })

  it('answers app.bsky.actor.getProfile for an account written through the PDS', async () => {
    expect(seq).toBeGreaterThan(0)
    await waitForSeq(`http://127.0.0.1:${dataplanePort}`, seq)
    const appview = `http://127.0.0.1:${appviewPort}`
    const byDid = await getProfile(appview, did)
    expect(byDid.did).toBe(did)
    expect(byDid.handle).toBe('alice.test')
    expect(byDid.displayName).toBe('Alice Through The Stack')
    expect(byDid.description).toBe('indexed by openplane')
    // Image links are built from the default public URL, http://localhost:<APPVIEW_PORT>.
    expect(byDid.avatar).toMatch(new RegExp(`^http://localhost:${appviewPort}/img/`))
    // By handle: the AppView asks the dataplane which DID holds it.
    expect(await getProfile(appview, 'alice.test')).toEqual(byDid)
  })

  it('runs the AppView alone against another dataplane (APPVIEW_DATAPLANE_URLS)', async () => {
    const port = await freePort()
    const alone = await spawnReady(
      ['packages/cli/src/main.ts', 'appview'],
      {
        APPVIEW_DATAPLANE_URLS: `http://127.0.0.1:${dataplanePort}`,
        APPVIEW_PORT: String(port),
        DATAPLANE_DATA_DIR: aloneDir,
        DATAPLANE_PLC_URL: network.plc.url,
        NODE_ENV: 'production',
        LOG_LEVEL: 'info',
      },
      `http://127.0.0.1:${port}`,
      '/xrpc/_health',
    )
    children.push(alone)
    const profile = await getProfile(`http://127.0.0.1:${port}`, did)
    expect(profile.handle).toBe('alice.test')
    expect(profile.displayName).toBe('Alice Through The Stack')
    // No dataplane of its own: nothing listens on a bsky.Service port, nothing indexes.
    expect(alone.output()).not.toContain('bsky.Service listening')
    expect(alone.output()).not.toContain('indexer starting')
    expect(await alone.stop('SIGTERM'), alone.output().slice(-4000)).toBe(0)
  })

  it('stops cleanly on SIGTERM and keeps its signing key across a restart', async () => {
    const appview = `http://127.0.0.1:${appviewPort}`
    const keyFile = path.join(dataDir, SIGNING_KEY_FILE)
    const stored = readFileSync(keyFile, 'utf8').trim()
    const key = await publishedKey(appview)
    expect(key).toBe((await Secp256k1Keypair.import(stored)).did())

    // Twice, the second while the first drains (an orchestrator repeating itself): still a clean
    // stop, not the signal's default action.
    stack.proc.kill('SIGTERM')
    for (let i = 0; i < 100 && !stack.output().includes('"msg":"stopping"'); i++) {
      await new Promise((r) => setTimeout(r, 20))
    }
    expect(await stack.stop('SIGTERM'), stack.output().slice(-4000)).toBe(0)
    expect(stack.output()).toContain('"msg":"stopping"')
    expect(await refused(`${appview}/xrpc/_health`)).toBe(true)
    expect(await refused(`http://127.0.0.1:${dataplanePort}/_live`)).toBe(true)

    stack = await spawnStack()
    expect(readFileSync(keyFile, 'utf8').trim()).toBe(stored)
    expect(await publishedKey(appview)).toBe(key)
    expect(stack.output()).not.toContain('generated the AppView signing key')
    // The index survived too: the cursor resumed, the profile is still there.
    expect((await getProfile(appview, did)).handle).toBe('alice.test')
    expect(await stack.stop('SIGTERM'), stack.output().slice(-4000)).toBe(0)
  })

  it('refuses a bad setting by name before starting anything', () => {
    const res = spawnSync(process.execPath, ['packages/cli/src/main.ts', 'appview'], {
      cwd: root,
      env: { ...process.env, APPVIEW_PORT: 'eighty', DATAPLANE_DATA_DIR: dataDir },
      encoding: 'utf8',
      timeout: 30_000,
    })
    expect(res.status).toBe(2)
    expect(res.stderr).toContain('APPVIEW_PORT must be an integer')
  })
})

describe('appview settings', () => {
  const config = readConfig({ DATAPLANE_PLC_URL: 'http://plc.example:2582' })

  it('fills in what a newcomer leaves unset, and nothing the operator set', () => {
    const s = readAppViewSettings({ BSKY_PUBLIC_URL: 'https://appview.example' }, config, [])
    expect(s.port).toBe(2584)
    expect(s.dataplaneUrls).toBeUndefined()
    expect(s.signingKey).toEqual({ file: path.resolve('.data', SIGNING_KEY_FILE) })
    expect(s.env).toEqual({
      BSKY_PORT: '2584',
      BSKY_SERVER_DID: 'did:web:localhost',
      BSKY_DID_PLC_URL: 'http://plc.example:2582',
      MOD_SERVICE_DID: 'did:web:localhost',
      BSKY_BSYNC_URL: 'http://127.0.0.1:1',
    })
  })

  it('takes the dataplane URLs from the flag over the environment', () => {
    const env = { APPVIEW_DATAPLANE_URLS: 'http://a:2585,http://b:2585' }
    expect(readAppViewSettings(env, config, []).dataplaneUrls).toEqual([
      'http://a:2585',
      'http://b:2585',
    ])
    const s = readAppViewSettings(env, config, ['--dataplane-url', 'http://c:2585/'])
    expect(s.dataplaneUrls).toEqual(['http://c:2585'])
  })

  it.each([
    [{ APPVIEW_PORT: '0' }, 'APPVIEW_PORT'],
    [{ APPVIEW_PORT: '2585' }, 'APPVIEW_PORT must differ from DATAPLANE_PORT'],
    [{ APPVIEW_PORT: '3000', BSKY_PORT: '3001' }, 'disagree'],
    [{ BSKY_SERVER_DID: 'localhost' }, 'BSKY_SERVER_DID'],
    [{ MOD_SERVICE_DID: 'mod' }, 'MOD_SERVICE_DID'],
    [{ BSKY_PUBLIC_URL: 'localhost:2584' }, 'BSKY_PUBLIC_URL'],
    [{ BSKY_SERVICE_SIGNING_KEY: 'abc' }, 'BSKY_SERVICE_SIGNING_KEY'],
    [{ BSKY_DATAPLANE_URLS: 'http://x:2585' }, 'APPVIEW_DATAPLANE_URLS'],
    [{ APPVIEW_DATAPLANE_URLS: 'grpc://x:2585' }, 'APPVIEW_DATAPLANE_URLS'],
  ])('refuses %o naming it', (env, message) => {
    expect(() => readAppViewSettings(env, config, [])).toThrow(ConfigError)
    expect(() => readAppViewSettings(env, config, [])).toThrow(message)
  })

  it('reaches a dataplane bound to every interface over loopback', () => {
    const any = readConfig({ DATAPLANE_HOST: '0.0.0.0', DATAPLANE_PORT: '0' })
    expect(embeddedUrl(any, 'http://0.0.0.0:41234')).toBe('http://127.0.0.1:41234')
    const v6 = readConfig({ DATAPLANE_HOST: '::' })
    expect(embeddedUrl(v6, 'http://:::2585')).toBe('http://[::1]:2585')
  })
})
