// Postgres down when openplane starts (the usual start-order race in compose or Kubernetes): the
// process waits for it with backoff instead of exiting, and serves once it answers; while it is
// away later, the process is live but not ready.
import { afterAll, describe, expect, it } from 'vitest'
import { PG_URL, uniqueName } from '../harness/env.ts'
import { startFakeRelay, type FakeRelay } from '../harness/fake-relay.ts'
import { startPgCutProxy, type PgCutProxy } from '../harness/pg-cut-proxy.ts'
import { spawnDataplane, type Child } from '../harness/processes.ts'
import { dropSchemas } from '../harness/stock-network.ts'

describe('Postgres down at start', () => {
  const schema = uniqueName('op_pglate')
  let proxy: PgCutProxy | undefined
  let relay: FakeRelay | undefined
  let dataplane: Child | undefined

  afterAll(async () => {
    await dataplane?.stop()
    await relay?.close()
    await proxy?.close()
    await dropSchemas([schema])
  })

  it('waits for Postgres, then becomes ready and serves', async () => {
    proxy = await startPgCutProxy(PG_URL)
    relay = await startFakeRelay([])
    proxy.down()
    const starting = spawnDataplane({
      pgUrl: proxy.url,
      schema,
      plcUrl: 'http://127.0.0.1:1',
      pdsUrl: relay.url.replace(/^ws/, 'http'),
    })
    // Still alive (spawnReady would have thrown on an exit), not ready, while Postgres is away:
    // wait until it has been refused twice (it retries, with backoff), however long the process
    // takes to start on a loaded machine, and check it has neither become ready nor exited.
    let settled: 'ready' | 'exited' | undefined
    starting.then(
      () => (settled = 'ready'),
      () => (settled = 'exited'),
    )
    const deadline = Date.now() + 60_000
    while (proxy.refused < 2 && settled === undefined && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50))
    }
    expect(settled).toBeUndefined()
    expect(proxy.refused).toBeGreaterThanOrEqual(2)
    proxy.up()
    dataplane = await starting
    const health = (await (await fetch(`${dataplane.url}/_health`)).json()) as { ready: boolean }
    expect(health.ready).toBe(true)
    expect(dataplane.output()).toMatch(/Postgres not reachable yet; waiting/)
  })

  it('is live but not ready while Postgres is away, and ready again once it is back', async () => {
    const get = async (path: string) => {
      const res = await fetch(`${dataplane!.url}${path}`)
      return { status: res.status, body: (await res.json()) as Record<string, unknown> }
    }
    const deps = (await get('/_ready')).body.dependencies as Record<string, unknown>
    expect(deps.postgres).toEqual({ ok: true })
    expect(deps.timelineStore).toMatchObject({ ok: true, state: 'serving' })
    // The relay is reported with its state, and does not decide readiness.
    expect(deps.sources).toMatchObject([{ ok: true, connected: true, source: relay!.url }])
    proxy!.down()
    try {
      const ready = await get('/_ready')
      expect(ready.status).toBe(503)
      expect((ready.body.dependencies as { postgres: { ok: boolean } }).postgres.ok).toBe(false)
      expect((await get('/_live')).status).toBe(200)
    } finally {
      proxy!.up()
    }
    expect((await get('/_ready')).status).toBe(200)
  })
})
