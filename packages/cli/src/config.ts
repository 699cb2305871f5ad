// Configuration from the environment, validated up front: a bad value stops the process with a
// message naming the variable instead of surfacing later as a confusing failure.
export interface Config {
  host: string
  port: number
  tls?: { keyFile: string; certFile: string }
  postgres?: { url: string; poolSize: number }
  schema: string
  dataDir: string
  plcUrl: string
  allowPrivateNetwork: boolean
  testHandles?: { pdsUrl: string; suffixes: string[] }
  indexer: boolean
  firehoseUrls: string[]
  verifyCommits: boolean
  initialCursor?: number
  batchSize: number
  batchWaitMs: number
}

export class ConfigError extends Error {}

type Env = Record<string, string | undefined>

function str(env: Env, name: string, dflt?: string): string {
  const v = env[name]?.trim()
  if (v) return v
  if (dflt === undefined) throw new ConfigError(`${name} is required`)
  return dflt
}

function int(env: Env, name: string, dflt: number, min: number, max: number): number {
  const raw = env[name]?.trim()
  if (!raw) return dflt
  const n = Number(raw)
  if (!Number.isInteger(n) || n < min || n > max) {
    throw new ConfigError(`${name} must be an integer in [${min}, ${max}], got "${raw}"`)
  }
  return n
}

function bool(env: Env, name: string, dflt: boolean): boolean {
  const raw = env[name]?.trim().toLowerCase()
  if (!raw) return dflt
  if (['1', 'true', 'yes', 'on'].includes(raw)) return true
  if (['0', 'false', 'no', 'off'].includes(raw)) return false
  throw new ConfigError(`${name} must be true or false, got "${raw}"`)
}

function url(env: Env, name: string, dflt: string | undefined, protocols: string[]): string {
  const v = dflt === undefined && !env[name]?.trim() ? '' : str(env, name, dflt)
  if (!v) return v
  let u: URL
  try {
    u = new URL(v)
  } catch {
    throw new ConfigError(`${name} is not a URL: "${v}"`)
  }
  if (!protocols.includes(u.protocol)) {
    throw new ConfigError(`${name} must use ${protocols.join(' or ')}, got "${v}"`)
  }
  return v.replace(/\/+$/, '')
}

function list(env: Env, name: string, dflt: string): string[] {
  return str(env, name, dflt)
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
}

export function readConfig(env: Env = process.env): Config {
  const keyFile = env.DATAPLANE_TLS_KEY?.trim()
  const certFile = env.DATAPLANE_TLS_CERT?.trim()
  if (!!keyFile !== !!certFile) {
    throw new ConfigError('DATAPLANE_TLS_KEY and DATAPLANE_TLS_CERT must be set together')
  }
  const pgUrl = url(env, 'DB_POSTGRES_URL', undefined, ['postgres:', 'postgresql:'])
  const schema = str(env, 'DB_POSTGRES_SCHEMA', 'bsky')
  if (!/^[A-Za-z_][A-Za-z0-9_]{0,62}$/.test(schema)) {
    throw new ConfigError(`DB_POSTGRES_SCHEMA must be a plain identifier, got "${schema}"`)
  }
  const firehoseUrls = list(env, 'DATAPLANE_FIREHOSE_URLS', 'wss://bsky.network')
  for (const [i, u] of firehoseUrls.entries()) {
    url({ [`DATAPLANE_FIREHOSE_URLS[${i}]`]: u }, `DATAPLANE_FIREHOSE_URLS[${i}]`, u, [
      'ws:',
      'wss:',
    ])
  }
  const testPds = url(env, 'DATAPLANE_TEST_HANDLE_PDS_URL', undefined, ['http:', 'https:'])
  return {
    host: str(env, 'DATAPLANE_HOST', '127.0.0.1'),
    port: int(env, 'DATAPLANE_PORT', 2585, 0, 65535),
    tls: keyFile && certFile ? { keyFile, certFile } : undefined,
    postgres: pgUrl
      ? { url: pgUrl, poolSize: int(env, 'DB_POSTGRES_POOL_SIZE', 10, 1, 1000) }
      : undefined,
    schema,
    dataDir: str(env, 'DATAPLANE_DATA_DIR', '.data'),
    plcUrl: url(env, 'DATAPLANE_PLC_URL', 'https://plc.directory', ['http:', 'https:']),
    allowPrivateNetwork: bool(env, 'DATAPLANE_ALLOW_PRIVATE_NETWORK', false),
    testHandles: testPds
      ? { pdsUrl: testPds, suffixes: list(env, 'DATAPLANE_TEST_HANDLE_SUFFIXES', '.test') }
      : undefined,
    indexer: bool(env, 'DATAPLANE_INDEXER', true),
    firehoseUrls,
    verifyCommits: bool(env, 'DATAPLANE_VERIFY_COMMITS', false),
    initialCursor: env.DATAPLANE_FIREHOSE_CURSOR?.trim()
      ? int(env, 'DATAPLANE_FIREHOSE_CURSOR', 0, 0, Number.MAX_SAFE_INTEGER)
      : undefined,
    batchSize: int(env, 'DATAPLANE_BATCH_SIZE', 500, 1, 100_000),
    batchWaitMs: int(env, 'DATAPLANE_BATCH_WAIT_MS', 20, 0, 60_000),
  }
}
