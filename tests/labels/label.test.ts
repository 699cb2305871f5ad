// A label's checks on their own: shape, the bytes its signature covers, and which of several
// copies of one label wins (the newest cts, a negation included).
import { Secp256k1Keypair } from '@atproto/crypto'
import { encode } from '@atproto/lex-cbor'
import { describe, expect, it } from 'vitest'
import { checkLabel, newestPerKey, signedBy, type LabelRow } from '@openplane/labels'

const SRC = 'did:plc:labelerlabelerlabelerlab'
const URI = 'at://did:plc:aaaaaaaaaaaaaaaaaaaaaaaa/app.bsky.feed.post/3kpost'

/** Signed as labelers sign: DAG-CBOR of the label without sig, version 1. */
async function signed(key: Secp256k1Keypair, label: Record<string, unknown>) {
  const unsigned = { ver: 1, ...label }
  return { ...unsigned, sig: await key.sign(encode(unsigned as never)) }
}

describe('labels', () => {
  it('verifies the signature over the label without sig, and nothing else', async () => {
    const key = await Secp256k1Keypair.create()
    const other = await Secp256k1Keypair.create()
    const label = await signed(key, {
      src: SRC,
      uri: URI,
      val: 'spam',
      cts: new Date().toISOString(),
    })
    const ok = checkLabel(label, SRC)
    if (!ok.ok) throw new Error(ok.detail)
    expect(await signedBy(key.did(), ok.signed, ok.sig)).toBe(true)
    expect(await signedBy(other.did(), ok.signed, ok.sig)).toBe(false)
    // Any field changed after signing breaks it.
    const tampered = checkLabel({ ...label, val: 'porn' }, SRC)
    if (!tampered.ok) throw new Error(tampered.detail)
    expect(await signedBy(key.did(), tampered.signed, tampered.sig)).toBe(false)
    // A negation's neg is part of what is signed.
    const neg = await signed(key, {
      src: SRC,
      uri: URI,
      val: 'spam',
      neg: true,
      cts: new Date().toISOString(),
    })
    const n = checkLabel(neg, SRC)
    if (!n.ok) throw new Error(n.detail)
    expect(n.row.neg).toBe(true)
    expect(await signedBy(key.did(), n.signed, n.sig)).toBe(true)
  })

  it('refuses labels of the wrong shape, with the reason', () => {
    const base = {
      src: SRC,
      uri: URI,
      val: 'spam',
      cts: new Date().toISOString(),
      sig: new Uint8Array(64),
    }
    const bad: [Record<string, unknown>, RegExp][] = [
      [{ ...base, src: 'did:plc:someoneelse' }, /not the labeler/],
      [{ ...base, uri: 'not a uri' }, /uri/],
      [{ ...base, val: '' }, /val/],
      [{ ...base, val: 'x'.repeat(129) }, /val/],
      [{ ...base, cts: 'yesterday' }, /cts/],
      [{ ...base, exp: 42 }, /exp/],
      [{ ...base, neg: 'yes' }, /neg/],
      [{ ...base, sig: undefined }, /signature/],
      [{ ...base, ver: 2 }, /version/],
      [{ ...base, val: 'a\u0000b' }, /NUL/],
    ]
    for (const [label, reason] of bad) {
      const c = checkLabel(label, SRC)
      expect(c.ok).toBe(false)
      if (!c.ok) expect(c.detail).toMatch(reason)
    }
    expect(checkLabel('nope', SRC).ok).toBe(false)
  })

  it('keeps the newest copy of a label per key, a negation included', () => {
    const row = (cts: string, neg: boolean): LabelRow => ({
      src: SRC,
      uri: URI,
      cid: '',
      val: 'spam',
      neg,
      cts,
      exp: null,
    })
    const out = newestPerKey([
      row('2026-01-02T00:00:00Z', true),
      row('2026-01-01T00:00:00Z', false),
    ])
    expect(out).toEqual([row('2026-01-02T00:00:00Z', true)])
    const tie = newestPerKey([
      row('2026-01-01T00:00:00Z', false),
      row('2026-01-01T00:00:00Z', true),
    ])
    expect(tie[0]!.neg).toBe(true)
  })
})
