import { describe, expect, it } from 'vitest'
import { counter, registry } from './metrics.ts'
import { flushTallies, Tally } from './tally.ts'

const valueOf = async (name: string, labels: Record<string, string>) => {
  const metric = registry.getSingleMetric(name)!
  const { values } = await metric.get()
  const found = values.find((v) =>
    Object.entries(labels).every(([k, x]) => (v.labels as Record<string, unknown>)[k] === x),
  )
  return found?.value ?? 0
}

describe('tally', () => {
  it('hands out one function per label values, counted into the counter on flush', async () => {
    const c = counter('test_tally_flush_total', 'test', ['kind', 'outcome'])
    const tally = new Tally(c, ['kind', 'outcome'])
    const a = tally.of('post', 'applied')
    expect(tally.of('post', 'applied')).toBe(a)
    const b = tally.of('like', 'applied')
    a()
    a()
    b()
    flushTallies()
    expect((await c.get()).values.map((v) => [v.labels, v.value])).toEqual([
      [{ kind: 'post', outcome: 'applied' }, 2],
      [{ kind: 'like', outcome: 'applied' }, 1],
    ])
    // Flushed counts are not added twice.
    flushTallies()
    a()
    flushTallies()
    expect(await valueOf('test_tally_flush_total', { kind: 'post' })).toBe(3)
  })

  it('is counted in when the registry is read, without a flush', async () => {
    const c = counter('test_tally_read_total', 'test', ['outcome'])
    const count = new Tally(c, ['outcome']).of('event')
    for (let i = 0; i < 5; i++) count()
    expect(await valueOf('test_tally_read_total', { outcome: 'event' })).toBe(5)
    expect(await registry.metrics()).toContain('test_tally_read_total{outcome="event"} 5')
  })

  it('refuses values that do not match its label names', () => {
    const c = counter('test_tally_arity_total', 'test', ['a', 'b'])
    expect(() => new Tally(c, ['a', 'b']).of('x')).toThrow(/needs 2 values/)
    expect(() => new Tally(c, [])).toThrow(/at least one label/)
  })
})
