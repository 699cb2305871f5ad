// `openplane appview`: the whole read path in one process. It starts the dataplane exactly as
// `openplane start` does, then the stock AppView of the pinned @atproto/bsky in front of it, so
// `app.bsky.*` answers on localhost with one command. With --dataplane-url (or
// APPVIEW_DATAPLANE_URLS) it runs the stock AppView alone against dataplanes that run elsewhere:
// the compose file's `appview` service, beside its `openplane` one.
//
// The AppView is configured as production configures it, by ServerConfig.readEnv(): every BSKY_*
// variable the operator sets reaches it unchanged. This module only fills in what a newcomer on
// localhost cannot be expected to know (a server DID, a public URL, a signing key, a bsync URL),
// and points BSKY_DATAPLANE_URLS at the dataplane.
import { randomBytes } from 'node:crypto'
import { mkdir, readFile, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { parseArgs } from 'node:util'
import type { BskyAppView, ServerConfig } from '@atproto/bsky'
import { Secp256k1Keypair } from '@atproto/crypto'
import { childLogger } from '@openplane/telemetry'
import { UsageError } from './backfill.ts'
import { ConfigError, type Config } from './config.ts'
import { stopOnSignals } from './signals.ts'
import { start, type Running } from './start.ts'

const log = childLogger('appview')

export const APPVIEW_USAGE = `usage: openplane appview [--dataplane-url <url>]...
  Starts the dataplane (as \`openplane start\`, same DATAPLANE_*/DB_* configuration) and the stock
  AppView in front of it, in one process.
  --dataplane-url <url>  run only the AppView, against this dataplane (repeatable; or
                         APPVIEW_DATAPLANE_URLS, comma-separated)
  Environment (besides the dataplane's):
  APPVIEW_PORT              AppView port (default 2584; BSKY_PORT is read too)
  BSKY_SERVER_DID           the AppView's DID (default did:web:localhost)
  BSKY_PUBLIC_URL           its public URL (default http://localhost:<port>)
  BSKY_SERVICE_SIGNING_KEY  secp256k1 private key, hex (default: generated once, kept in
                            DATAPLANE_DATA_DIR/appview-signing-key)
  BSKY_DID_PLC_URL          PLC directory (default DATAPLANE_PLC_URL)
  BSKY_BSYNC_URL            bsync (default DATAPLANE_BSYNC_URL; unset: bsync writes fail)
  MOD_SERVICE_DID           moderation service trusted by the AppView (default: its own DID)
  any other BSKY_* variable is passed to the stock AppView's ServerConfig.readEnv()`

/** The signing key's file in the data directory when BSKY_SERVICE_SIGNING_KEY is unset. */
export const SIGNING_KEY_FILE = 'appview-signing-key'

/**
 * readEnv() insists on a bsync URL, but a newcomer has no bsync. The AppView calls bsync only for
 * writes (mutes, bookmarks, drafts, notification settings), so it runs without one; this address
 * refuses connections at once, and those writes fail fast instead of hanging.
 */
const NO_BSYNC_URL = 'http://127.0.0.1:1'

type Env = Record<string, string | undefined>

export interface AppViewSettings {
  port: number
  /** Dataplanes to call; undefined: the one this process starts. */
  dataplaneUrls?: string[]
  /** BSKY_SERVICE_SIGNING_KEY, or the file holding the key (created on first start). */
  signingKey: { hex: string } | { file: string }
  /**
   * What readEnv() must see, beyond what the operator set: defaults for the variables left unset
   * (the operator's own values are never overwritten).
   */
  env: Record<string, string>
}

/**
 * Reads and checks the AppView's settings, so a mistake stops the process before anything starts,
 * with a message naming the variable (as config.ts does for the dataplane's).
 */
export function readAppViewSettings(env: Env, config: Config, argv: string[]): AppViewSettings {
  const args = parseOptions(argv)
  if (env.BSKY_DATAPLANE_URLS?.trim()) {
    throw new ConfigError(
      'BSKY_DATAPLANE_URLS is set by openplane appview; to run the AppView against another ' +
        'dataplane, use APPVIEW_DATAPLANE_URLS or --dataplane-url',
    )
  }
  const fromArgs = args.flatMap((u) => u.split(','))
  const external = fromArgs.length ? fromArgs : list(env, 'APPVIEW_DATAPLANE_URLS')
  const name = fromArgs.length ? '--dataplane-url' : 'APPVIEW_DATAPLANE_URLS'
  const dataplaneUrls = external.map((u) => checkUrl(name, u))

  const appviewPort = port(env, 'APPVIEW_PORT')
  const bskyPort = port(env, 'BSKY_PORT')
  if (appviewPort !== undefined && bskyPort !== undefined && appviewPort !== bskyPort) {
    throw new ConfigError(`APPVIEW_PORT (${appviewPort}) and BSKY_PORT (${bskyPort}) disagree`)
  }
  const p = appviewPort ?? bskyPort ?? 2584
  if (!dataplaneUrls.length && p === config.port) {
    throw new ConfigError(`APPVIEW_PORT must differ from DATAPLANE_PORT (both ${p})`)
  }

  const serverDid = did(env, 'BSKY_SERVER_DID') ?? 'did:web:localhost'
  const defaults: Record<string, string> = {
    BSKY_PORT: String(p),
    BSKY_SERVER_DID: serverDid,
    BSKY_PUBLIC_URL: `http://localhost:${p}`,
    BSKY_DID_PLC_URL: config.plcUrl,
    // Without a moderation service of its own, the AppView trusts none but itself.
    MOD_SERVICE_DID: serverDid,
    // The same bsync the dataplane tails, when it tails one.
    BSKY_BSYNC_URL: config.bsync?.url ?? NO_BSYNC_URL,
    ...(config.bsync?.apiKey ? { BSKY_BSYNC_API_KEY: config.bsync.apiKey } : {}),
    ...(config.bsync ? { BSKY_BSYNC_HTTP_VERSION: config.bsync.httpVersion } : {}),
  }
  if (env.BSKY_PUBLIC_URL?.trim()) checkUrl('BSKY_PUBLIC_URL', env.BSKY_PUBLIC_URL.trim())
  if (env.BSKY_DID_PLC_URL?.trim()) checkUrl('BSKY_DID_PLC_URL', env.BSKY_DID_PLC_URL.trim())
  if (env.BSKY_BSYNC_URL?.trim()) checkUrl('BSKY_BSYNC_URL', env.BSKY_BSYNC_URL.trim())
  did(env, 'MOD_SERVICE_DID')

  const hex = env.BSKY_SERVICE_SIGNING_KEY?.trim()
  if (hex !== undefined && hex !== '' && !/^[0-9a-fA-F]{64}$/.test(hex)) {
    throw new ConfigError('BSKY_SERVICE_SIGNING_KEY must be a secp256k1 private key, 64 hex digits')
  }

  const unset = Object.entries(defaults).filter(([k]) => !env[k]?.trim())
  return {
    port: p,
    dataplaneUrls: dataplaneUrls.length ? dataplaneUrls : undefined,
    signingKey: hex ? { hex } : { file: path.resolve(config.dataDir, SIGNING_KEY_FILE) },
    env: Object.fromEntries(unset),
  }
}

/** Runs the AppView (and the dataplane unless external); returns -1: the process keeps running. */
export async function appviewCommand(config: Config, argv: string[]): Promise<number> {
  const settings = readAppViewSettings(process.env, config, argv)
  // readEnv() reads process.env itself; the defaults go there, under the operator's values.
  Object.assign(process.env, settings.env)
  const signingKey = await loadSigningKey(settings.signingKey)
  // Loaded here, not at the top: the AppView is large, and the other commands never need it.
  const bsky = await import('@atproto/bsky')
  // Checked before the dataplane starts: a BSKY_* value the AppView refuses stops us at once.
  serverConfig(bsky.ServerConfig, settings.dataplaneUrls ?? ['http://127.0.0.1:2585'])

  const running: Running | undefined = settings.dataplaneUrls ? undefined : await start(config)
  const dataplaneUrls = settings.dataplaneUrls ?? [embeddedUrl(config, running!.url)]
  let appView: BskyAppView
  try {
    const cfg = serverConfig(bsky.ServerConfig, dataplaneUrls)
    appView = bsky.BskyAppView.create({ config: cfg, signingKey })
    await appView.start()
  } catch (err) {
    await running?.stop()
    throw err
  }
  log.info(
    {
      url: `http://localhost:${settings.port}`,
      serverDid: appView.ctx.cfg.serverDid,
      signingKey: signingKey.did(),
      dataplaneUrls,
    },
    'AppView listening',
  )

  stopOnSignals(log, async () => {
    let code = 0
    // The AppView first: it stops taking requests while the dataplane can still answer the
    // ones in flight; then the dataplane drains and commits what its sources applied.
    try {
      await appView.destroy()
    } catch (err) {
      log.error({ err }, 'AppView stop failed')
      code = 1
    }
    try {
      await running?.stop()
    } catch (err) {
      log.error({ err }, 'dataplane stop failed')
      code = 1
    }
    return code
  })
  return -1
}

/** readEnv(), its assertions turned into a configuration error. */
function serverConfig(cls: typeof ServerConfig, dataplaneUrls: string[]): ServerConfig {
  try {
    return cls.readEnv({ dataplaneUrls })
  } catch (err) {
    const msg = err instanceof Error ? err.message : String(err)
    throw new ConfigError(`the AppView refused its BSKY_* configuration: ${msg}`)
  }
}

/**
 * The key from BSKY_SERVICE_SIGNING_KEY, else the one in the data directory, made on the first
 * start: the AppView's DID document publishes it, so it must survive restarts.
 */
export async function loadSigningKey(
  source: AppViewSettings['signingKey'],
): Promise<Secp256k1Keypair> {
  if ('hex' in source) return Secp256k1Keypair.import(source.hex)
  const file = source.file
  const stored = await readFile(file, 'utf8').catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return undefined
    throw new ConfigError(`cannot read the AppView signing key ${file}: ${err.message}`)
  })
  if (stored !== undefined) {
    const hex = stored.trim()
    if (!/^[0-9a-fA-F]{64}$/.test(hex)) {
      throw new ConfigError(`${file} does not hold a secp256k1 private key (64 hex digits)`)
    }
    return Secp256k1Keypair.import(hex)
  }
  const hex = randomBytes(32).toString('hex')
  await mkdir(path.dirname(file), { recursive: true })
  try {
    // wx: two processes starting at once must not each write their own key.
    await writeFile(file, hex + '\n', { mode: 0o600, flag: 'wx' })
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return loadSigningKey(source)
    throw err
  }
  const key = await Secp256k1Keypair.import(hex)
  log.info({ file, did: key.did() }, 'generated the AppView signing key')
  return key
}

/**
 * The URL the AppView reaches the dataplane this process started at: its port, on loopback when
 * it listens on every interface (0.0.0.0 is not an address to connect to everywhere).
 */
export function embeddedUrl(config: Config, serverUrl: string): string {
  const port = /:(\d+)$/.exec(serverUrl)?.[1] ?? String(config.port)
  const host = config.host === '0.0.0.0' ? '127.0.0.1' : config.host === '::' ? '::1' : config.host
  return `${config.tls ? 'https' : 'http'}://${host.includes(':') ? `[${host}]` : host}:${port}`
}

function parseOptions(argv: string[]): string[] {
  try {
    const { values } = parseArgs({
      args: argv,
      options: { 'dataplane-url': { type: 'string', multiple: true } },
      strict: true,
    })
    return values['dataplane-url'] ?? []
  } catch (err) {
    throw new UsageError(err instanceof Error ? err.message : String(err))
  }
}

function list(env: Env, name: string): string[] {
  return (env[name] ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
}

function port(env: Env, name: string): number | undefined {
  const raw = env[name]?.trim()
  if (!raw) return undefined
  const n = Number(raw)
  if (!Number.isInteger(n) || n < 1 || n > 65535) {
    throw new ConfigError(`${name} must be an integer in [1, 65535], got "${raw}"`)
  }
  return n
}

const DID = /^did:[a-z]+:[A-Za-z0-9._:%-]*[A-Za-z0-9._-]$/

function did(env: Env, name: string): string | undefined {
  const raw = env[name]?.trim()
  if (!raw) return undefined
  if (!DID.test(raw)) throw new ConfigError(`${name} must be a DID, got "${raw}"`)
  return raw
}

function checkUrl(name: string, value: string): string {
  let u: URL
  try {
    u = new URL(value)
  } catch {
    throw new ConfigError(`${name} is not a URL: "${value}"`)
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') {
    throw new ConfigError(`${name} must use http: or https:, got "${value}"`)
  }
  return value.replace(/\/+$/, '')
}
