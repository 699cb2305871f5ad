// The Grafana dashboard in infra/ only queries metrics the process really exports.
import { readFileSync } from 'node:fs'
import path from 'node:path'
import '@openplane/bsync'
import '@openplane/fanout'
import '@openplane/ingest'
import '@openplane/labels'
import '@openplane/server'
import '@openplane/subscribe'
import { registry } from '@openplane/telemetry'
import { describe, expect, it } from 'vitest'

const dashboard = readFileSync(
  path.resolve(import.meta.dirname, '../../infra/grafana/dashboards/openplane.json'),
  'utf8',
)

describe('infra dashboard', () => {
  it('references only exported metric names', async () => {
    const exported = new Set((await registry.getMetricsAsJSON()).map((m) => m.name))
    const used = new Set(
      [...dashboard.matchAll(/openplane_[a-z_]+/g)].map((m) =>
        m[0].replace(/_(bucket|count|sum)$/, ''),
      ),
    )
    expect(used.size).toBeGreaterThan(5)
    expect([...used].filter((name) => !exported.has(name))).toEqual([])
  })
})
