// Configuration errors name the variable; defaults are the documented ones.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { describe, expect, it } from 'vitest'
import { ConfigError, readConfig } from '../../packages/cli/src/config.ts'

describe('configuration from env', () => {
  it('has the documented defaults', () => {
    const c = readConfig({})
    expect(c).toMatchObject({
      host: '127.0.0.1',
      port: 2585,
      schema: 'bsky',
      postgres: undefined,
      indexer: true,
      firehoseUrls: ['wss://bsky.network'],
      verifyCommits: false,
      plcUrl: 'https://plc.directory',
      graph: true,
      timelines: {
        store: 'memory',
        redisNodes: [{ host: '127.0.0.1', port: 6379 }],
        redisCluster: false,
        targetLength: 500,
        celebrityFollowers: 10_000,
        lossyFollowLimit: 2000,
        activeWindowMs: 7 * 24 * 3600 * 1000,
        celebrityCopies: 5000,
      },
    })
  })

  it('reads the timeline settings', () => {
    const c = readConfig({
      DATAPLANE_REDIS_NODES: 'r1:7000, [::1]:7001,r3',
      DATAPLANE_REDIS_CLUSTER: 'yes',
      DATAPLANE_CELEBRITY_FOLLOWERS: 'off',
      DATAPLANE_LOSSY_FOLLOW_LIMIT: '0',
      DATAPLANE_CELEBRITY_COPIES: '0',
    })
    expect(c.timelines).toMatchObject({
      store: 'redis',
      redisNodes: [
        { host: 'r1', port: 7000 },
        { host: '::1', port: 7001 },
        { host: 'r3', port: 6379 },
      ],
      redisCluster: true,
      celebrityFollowers: Infinity,
      lossyFollowLimit: Infinity,
      celebrityCopies: 0,
    })
    // One Redis on this machine, by its Unix socket.
    const local = readConfig({ DATAPLANE_REDIS_NODES: '/run/redis/redis.sock' })
    expect(local.timelines.redisNodes).toEqual([{ path: '/run/redis/redis.sock' }])
    // Without the indexer in the process there is no graph, and so no fan-out.
    const replica = readConfig({ DATAPLANE_INDEXER: 'false', DATAPLANE_TIMELINES: 'redis' })
    expect(replica.graph).toBe(false)
    expect(replica.timelines.store).toBe('off')
  })

  it.each([
    [{ DATAPLANE_PORT: '70000' }, /DATAPLANE_PORT/],
    [{ DATAPLANE_PORT: 'eighty' }, /DATAPLANE_PORT/],
    [{ DB_POSTGRES_URL: 'mysql://x' }, /DB_POSTGRES_URL/],
    [{ DB_POSTGRES_URL: 'not a url' }, /DB_POSTGRES_URL/],
    [{ DB_POSTGRES_SCHEMA: 'bad-name;drop' }, /DB_POSTGRES_SCHEMA/],
    [
      { DATAPLANE_FIREHOSE_URLS: 'wss://ok.example,http://wrong.example' },
      /DATAPLANE_FIREHOSE_URLS\[1\]/,
    ],
    [{ DATAPLANE_VERIFY_COMMITS: 'maybe' }, /DATAPLANE_VERIFY_COMMITS/],
    [{ DATAPLANE_TLS_KEY: '/k.pem' }, /DATAPLANE_TLS_KEY and DATAPLANE_TLS_CERT/],
    [{ DATAPLANE_BATCH_SIZE: '0' }, /DATAPLANE_BATCH_SIZE/],
    [{ DATAPLANE_WRITER_KEPT_POSTS: '-1' }, /DATAPLANE_WRITER_KEPT_POSTS/],
    [{ DATAPLANE_WRITER_KEPT_REPOS: 'many' }, /DATAPLANE_WRITER_KEPT_REPOS/],
    [{ DATAPLANE_FIREHOSE_CURSOR: '-1' }, /DATAPLANE_FIREHOSE_CURSOR/],
    [{ DATAPLANE_TIMELINES: 'disk' }, /DATAPLANE_TIMELINES/],
    [{ DATAPLANE_REDIS_NODES: 'r1:port' }, /DATAPLANE_REDIS_NODES/],
    [{ DATAPLANE_REDIS_NODES: 'r1:99999' }, /DATAPLANE_REDIS_NODES/],
    [{ DATAPLANE_REDIS_NODES: 'run/redis.sock' }, /DATAPLANE_REDIS_NODES/],
    [{ DATAPLANE_REDIS_NODES: '/a.sock,/b.sock' }, /DATAPLANE_REDIS_NODES/],
    [
      { DATAPLANE_REDIS_NODES: '/a.sock', DATAPLANE_REDIS_CLUSTER: 'true' },
      /DATAPLANE_REDIS_NODES/,
    ],
    [{ DATAPLANE_REDIS_PREFIX: 'a{b}' }, /DATAPLANE_REDIS_PREFIX/],
    [{ DATAPLANE_CELEBRITY_FOLLOWERS: '-5' }, /DATAPLANE_CELEBRITY_FOLLOWERS/],
    [{ DATAPLANE_LOSSY_FOLLOW_LIMIT: 'lots' }, /DATAPLANE_LOSSY_FOLLOW_LIMIT/],
    [{ DATAPLANE_ACTIVE_WINDOW_MINUTES: '0' }, /DATAPLANE_ACTIVE_WINDOW_MINUTES/],
    [{ DATAPLANE_CELEBRITY_COPIES: '-1' }, /DATAPLANE_CELEBRITY_COPIES/],
    [{ DATAPLANE_GRAPH: 'sometimes' }, /DATAPLANE_GRAPH/],
  ])('%o is refused with a message naming it', (env, message) => {
    expect(() => readConfig(env)).toThrow(ConfigError)
    expect(() => readConfig(env)).toThrow(message)
  })

  it('reads a full production configuration', () => {
    const c = readConfig({
      DB_POSTGRES_URL: 'postgresql://u:p@db:5432/bsky',
      DB_POSTGRES_SCHEMA: 'appview',
      DATAPLANE_FIREHOSE_URLS: 'wss://relay1.example, wss://relay2.example',
      DATAPLANE_VERIFY_COMMITS: 'true',
      DATAPLANE_FIREHOSE_CURSOR: '12345',
    })
    expect(c.postgres).toEqual({
      url: 'postgresql://u:p@db:5432/bsky',
      poolSize: 10,
      statementTimeoutMs: 30_000,
      connectTimeoutMs: 5000,
      idleTimeoutMs: 300_000,
      preparedStatements: 200,
    })
    expect(c.firehoseUrls).toEqual(['wss://relay1.example', 'wss://relay2.example'])
    expect(c.verifyCommits).toBe(true)
    expect(c.initialCursor).toBe(12345)
  })

  it('reads a community from DIDs, a DID file and lists, and names the variable at fault', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'opcfg-'))
    const file = path.join(dir, 'members.txt')
    writeFileSync(file, '# members\ndid:plc:bbb\n\ndid:web:example.com # a web DID\n')
    try {
      expect(readConfig({}).community).toBeUndefined()
      const c = readConfig({
        DATAPLANE_COMMUNITY_DIDS: 'did:plc:aaa, did:plc:bbb',
        DATAPLANE_COMMUNITY_DIDS_FILE: file,
        DATAPLANE_COMMUNITY_LISTS: 'at://did:plc:owner/app.bsky.graph.list/3kabc',
        DATAPLANE_COMMUNITY_FOLLOWS: 'true',
      })
      expect(c.community).toEqual({
        dids: ['did:plc:aaa', 'did:plc:bbb', 'did:web:example.com'],
        lists: ['at://did:plc:owner/app.bsky.graph.list/3kabc'],
        follows: true,
      })
      const bad: [Record<string, string>, RegExp][] = [
        [
          { DATAPLANE_COMMUNITY_DIDS: 'did:plc:aaa,alice.bsky.social' },
          /DATAPLANE_COMMUNITY_DIDS:2/,
        ],
        [
          { DATAPLANE_COMMUNITY_DIDS_FILE: path.join(dir, 'none') },
          /DATAPLANE_COMMUNITY_DIDS_FILE/,
        ],
        [
          { DATAPLANE_COMMUNITY_LISTS: 'at://did:plc:owner/app.bsky.feed.post/3kabc' },
          /DATAPLANE_COMMUNITY_LISTS/,
        ],
        [{ DATAPLANE_COMMUNITY_FOLLOWS: 'true' }, /DATAPLANE_COMMUNITY_FOLLOWS needs/],
      ]
      for (const [env, message] of bad) {
        expect(() => readConfig(env)).toThrow(ConfigError)
        expect(() => readConfig(env)).toThrow(message)
      }
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it('reads bsync settings, and refuses them without a URL or without the indexer', () => {
    expect(readConfig({}).bsync).toBeUndefined()
    expect(
      readConfig({
        DATAPLANE_BSYNC_URL: 'http://127.0.0.1:2586/',
        DATAPLANE_BSYNC_API_KEY: 'k',
        DATAPLANE_BSYNC_HTTP_VERSION: '1.1',
      }).bsync,
    ).toEqual({
      url: 'http://127.0.0.1:2586',
      apiKey: 'k',
      httpVersion: '1.1',
      ignoreBadTls: false,
    })
    const bad: [Record<string, string>, RegExp][] = [
      [{ DATAPLANE_BSYNC_API_KEY: 'k' }, /DATAPLANE_BSYNC_API_KEY needs DATAPLANE_BSYNC_URL/],
      [{ DATAPLANE_BSYNC_URL: 'ws://x' }, /DATAPLANE_BSYNC_URL must use/],
      [
        { DATAPLANE_BSYNC_URL: 'http://x', DATAPLANE_BSYNC_HTTP_VERSION: '3' },
        /DATAPLANE_BSYNC_HTTP_VERSION/,
      ],
      [{ DATAPLANE_BSYNC_URL: 'http://x', DATAPLANE_INDEXER: 'false' }, /DATAPLANE_INDEXER=true/],
    ]
    for (const [env, message] of bad) expect(() => readConfig(env)).toThrow(message)
  })

  it('reads the labelers to subscribe to, as DIDs', () => {
    expect(readConfig({}).labelers).toEqual([])
    expect(
      readConfig({ DATAPLANE_LABELERS: 'did:plc:aaa, did:web:labels.example.com,did:plc:aaa' })
        .labelers,
    ).toEqual(['did:plc:aaa', 'did:web:labels.example.com'])
    expect(() => readConfig({ DATAPLANE_LABELERS: 'mod.example.com' })).toThrow(
      /DATAPLANE_LABELERS/,
    )
    expect(() =>
      readConfig({ DATAPLANE_LABELERS: 'did:plc:aaa', DATAPLANE_INDEXER: 'false' }),
    ).toThrow(/DATAPLANE_INDEXER=true/)
    expect(readConfig({}).labelersFromRecords).toBeUndefined()
    expect(
      readConfig({
        DATAPLANE_LABELERS_FROM_RECORDS: 'true',
        DATAPLANE_LABELERS_DISCOVER_SECONDS: '5',
      }).labelersFromRecords,
    ).toEqual({ everyMs: 5000 })
    expect(() =>
      readConfig({
        DATAPLANE_LABELERS_FROM_RECORDS: 'true',
        DATAPLANE_LABELERS_DISCOVER_SECONDS: '0',
      }),
    ).toThrow(/DATAPLANE_LABELERS_DISCOVER_SECONDS/)
  })

  it('reads /subscribe and its log, and refuses the port without a window', () => {
    expect(readConfig({}).publishWindowMs).toBeUndefined()
    expect(readConfig({}).subscribe).toBeUndefined()
    expect(readConfig({ DATAPLANE_SUBSCRIBE_WINDOW_MINUTES: '90' }).publishWindowMs).toBe(5_400_000)
    expect(
      readConfig({
        DATAPLANE_HOST: '0.0.0.0',
        DATAPLANE_SUBSCRIBE_WINDOW_MINUTES: '60',
        DATAPLANE_SUBSCRIBE_PORT: '6008',
        DATAPLANE_SUBSCRIBE_STALL_SECONDS: '5',
      }).subscribe,
    ).toEqual({
      host: '0.0.0.0',
      port: 6008,
      memoryBytes: 64 * 1024 * 1024,
      stallMs: 5000,
      maxConsumers: 10_000,
      pollMs: 50,
    })
    expect(() => readConfig({ DATAPLANE_SUBSCRIBE_PORT: '6008' })).toThrow(
      /DATAPLANE_SUBSCRIBE_WINDOW_MINUTES/,
    )
    expect(() => readConfig({ DATAPLANE_SUBSCRIBE_HOST: '0.0.0.0' })).toThrow(
      /DATAPLANE_SUBSCRIBE_HOST needs DATAPLANE_SUBSCRIBE_PORT/,
    )
    expect(() =>
      readConfig({
        DATAPLANE_SUBSCRIBE_WINDOW_MINUTES: '60',
        DATAPLANE_SUBSCRIBE_PORT: '6008',
        DATAPLANE_SUBSCRIBE_MEMORY_MB: '0',
      }),
    ).toThrow(/DATAPLANE_SUBSCRIBE_MEMORY_MB/)
  })

  it('reads the connection limits, and refuses networks that are not CIDRs', () => {
    const dflt = readConfig({})
    expect(dflt.limits).toEqual({
      allowFrom: undefined,
      maxConnections: 10_000,
      firstByteMs: 10_000,
      idleMs: 600_000,
      maxStreams: 4000,
    })
    expect(dflt.maxRequestBytes).toBe(16 * 1024 * 1024)
    const c = readConfig({
      DATAPLANE_ALLOW_FROM: '10.0.0.0/8, 192.168.1.7, fd00::/8',
      DATAPLANE_MAX_CONNECTIONS: '50',
      DATAPLANE_FIRST_BYTE_TIMEOUT_MS: '2000',
      DATAPLANE_IDLE_TIMEOUT_SECONDS: '30',
      DATAPLANE_MAX_STREAMS: '100',
      DATAPLANE_MAX_REQUEST_MB: '4',
    })
    expect(c.limits).toEqual({
      allowFrom: ['10.0.0.0/8', '192.168.1.7', 'fd00::/8'],
      maxConnections: 50,
      firstByteMs: 2000,
      idleMs: 30_000,
      maxStreams: 100,
    })
    expect(c.maxRequestBytes).toBe(4 * 1024 * 1024)
    for (const bad of ['10.0.0.0/33', 'example.com', '10.0.0/8']) {
      expect(() => readConfig({ DATAPLANE_ALLOW_FROM: bad })).toThrow(/DATAPLANE_ALLOW_FROM/)
    }
  })

  it('reads the list limit, the ops port and the Postgres time limits', () => {
    const dflt = readConfig({})
    expect(dflt.maxListItems).toBe(25_000)
    expect(dflt.shedDelayMs).toBe(100)
    expect(readConfig({ DATAPLANE_SHED_DELAY_MS: '0' }).shedDelayMs).toBe(0)
    expect(() => readConfig({ DATAPLANE_SHED_DELAY_MS: '-5' })).toThrow(/DATAPLANE_SHED_DELAY_MS/)
    expect(dflt.processes).toBe(1)
    const pg = { DB_POSTGRES_URL: 'postgresql://db/bsky' }
    expect(readConfig({ ...pg, DATAPLANE_PROCESSES: '4' }).processes).toBe(4)
    expect(() => readConfig({ DATAPLANE_PROCESSES: '2' })).toThrow(/DB_POSTGRES_URL/)
    expect(() => readConfig({ ...pg, DATAPLANE_PROCESSES: '2', DATAPLANE_PORT: '0' })).toThrow(
      /DATAPLANE_PORT/,
    )
    expect(() =>
      readConfig({ ...pg, DATAPLANE_PROCESSES: '4', DATAPLANE_OPS_PORT: '2587' }),
    ).toThrow(/overlaps/)
    expect(() => readConfig({ ...pg, DATAPLANE_PROCESSES: '0' })).toThrow(/DATAPLANE_PROCESSES/)
    expect(dflt.maxTimelineReads).toBe(64)
    expect(readConfig({ DATAPLANE_MAX_TIMELINE_READS: '0' }).maxTimelineReads).toBe(0)
    expect(() => readConfig({ DATAPLANE_MAX_TIMELINE_READS: 'many' })).toThrow(
      /DATAPLANE_MAX_TIMELINE_READS/,
    )
    expect(dflt.ops).toBeUndefined()
    const c = readConfig({
      DB_POSTGRES_URL: 'postgresql://db/bsky',
      DB_POSTGRES_STATEMENT_TIMEOUT_MS: '0',
      DB_POSTGRES_CONNECT_TIMEOUT_MS: '1500',
      DB_POSTGRES_IDLE_TIMEOUT_MS: '0',
      DB_POSTGRES_PREPARED_STATEMENTS: '0',
      DATAPLANE_MAX_LIST_ITEMS: '5000',
      DATAPLANE_HOST: '0.0.0.0',
      DATAPLANE_OPS_PORT: '9090',
    })
    expect(c.postgres).toMatchObject({
      statementTimeoutMs: 0,
      connectTimeoutMs: 1500,
      idleTimeoutMs: 0,
      preparedStatements: 0,
    })
    expect(() =>
      readConfig({ DB_POSTGRES_URL: 'postgresql://db/x', DB_POSTGRES_PREPARED_STATEMENTS: 'yes' }),
    ).toThrow(/DB_POSTGRES_PREPARED_STATEMENTS/)
    expect(c.maxListItems).toBe(5000)
    expect(c.ops).toEqual({ host: '0.0.0.0', port: 9090 })
    expect(readConfig({ DATAPLANE_OPS_PORT: '9090', DATAPLANE_OPS_HOST: '10.1.2.3' }).ops).toEqual({
      host: '10.1.2.3',
      port: 9090,
    })
    expect(() => readConfig({ DATAPLANE_MAX_LIST_ITEMS: '40000' })).toThrow(
      /DATAPLANE_MAX_LIST_ITEMS/,
    )
    expect(() => readConfig({ DATAPLANE_OPS_PORT: '2585' })).toThrow(/DATAPLANE_OPS_PORT/)
    expect(() => readConfig({ DATAPLANE_OPS_HOST: '::' })).toThrow(/DATAPLANE_OPS_HOST/)
    expect(() =>
      readConfig({ DB_POSTGRES_URL: 'postgresql://db/x', DB_POSTGRES_STATEMENT_TIMEOUT_MS: '-1' }),
    ).toThrow(/DB_POSTGRES_STATEMENT_TIMEOUT_MS/)
  })
})
