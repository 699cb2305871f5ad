import { describe, expect, it } from 'vitest'
import { AskedKeys, answerKeys, type KeyLookup, type KeyRequests } from './asked-keys.ts'

/** AskedKeys wired to `lookup` as a worker is to its parent, counting the messages sent. */
function wired(lookup: KeyLookup, freshMs = 60_000) {
  const sent: KeyRequests[] = []
  const keys: AskedKeys = new AskedKeys(
    (asked) => {
      sent.push(asked)
      void answerKeys(lookup, asked).then((replies) => keys.answered(replies))
    },
    { max: 2, freshMs },
  )
  return { keys, sent }
}

describe('signing keys asked of the parent thread', () => {
  it('asks for the keys of one sweep in one message, once per DID', async () => {
    const asked: string[] = []
    const { keys, sent } = wired(async (did) => {
      asked.push(did)
      return `did:key:${did}`
    })
    const got = await Promise.all([
      keys.keyOf('did:plc:a', false),
      keys.keyOf('did:plc:b', false),
      keys.keyOf('did:plc:a', false),
    ])
    expect(got).toEqual(['did:key:did:plc:a', 'did:key:did:plc:b', 'did:key:did:plc:a'])
    expect(sent).toHaveLength(1)
    expect(asked).toEqual(['did:plc:a', 'did:plc:b'])
  })

  it('answers a known key without a message, and asks past it on refresh', async () => {
    let version = 1
    const { keys, sent } = wired(async (did) => `did:key:${did}#${version}`)
    expect(await keys.keyOf('did:plc:a', false)).toBe('did:key:did:plc:a#1')
    version = 2
    expect(await keys.keyOf('did:plc:a', false)).toBe('did:key:did:plc:a#1')
    expect(sent).toHaveLength(1)
    expect(await keys.keyOf('did:plc:a', true)).toBe('did:key:did:plc:a#2')
    // The refreshed key is the one kept.
    expect(await keys.keyOf('did:plc:a', false)).toBe('did:key:did:plc:a#2')
    expect(sent).toHaveLength(2)
  })

  it('asks again once a key is no longer fresh, and keeps only the most recent', async () => {
    const { keys, sent } = wired(async (did) => `did:key:${did}`, 0)
    await keys.keyOf('did:plc:a', false)
    await keys.keyOf('did:plc:a', false)
    expect(sent).toHaveLength(2)
    const bounded = wired(async (did) => `did:key:${did}`)
    for (const did of ['did:plc:a', 'did:plc:b', 'did:plc:c']) await bounded.keys.keyOf(did, false)
    await bounded.keys.keyOf('did:plc:c', false)
    expect(bounded.sent).toHaveLength(3)
    await bounded.keys.keyOf('did:plc:a', false)
    expect(bounded.sent).toHaveLength(4)
  })

  it('rejects when there is no key or the lookup fails, and keeps nothing', async () => {
    const { keys, sent } = wired(async (did) => {
      if (did === 'did:plc:gone') return null
      throw new Error('PLC unavailable')
    })
    await expect(keys.keyOf('did:plc:gone', false)).rejects.toThrow('no signing key')
    await expect(keys.keyOf('did:plc:down', false)).rejects.toThrow('PLC unavailable')
    await expect(keys.keyOf('did:plc:gone', false)).rejects.toThrow('no signing key')
    expect(sent).toHaveLength(3)
  })
})
