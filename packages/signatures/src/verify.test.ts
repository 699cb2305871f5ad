// Every signature vector of the atproto interop tests: valid low-S signatures verify, high-S and
// DER-encoded ones do not; and a signature made now by @atproto/crypto verifies, for both curves,
// while a changed message or another key does not.
import { readFileSync } from 'node:fs'
import path from 'node:path'
import { P256Keypair, Secp256k1Keypair } from '@atproto/crypto'
import { describe, expect, it } from 'vitest'
import { getKey } from '@atproto/identity'
import { signingKeyOf } from './did-key.ts'
import { signatureBackend, verifySignature } from './verify.ts'

interface Vector {
  comment: string
  messageBase64: string
  publicKeyDid: string
  signatureBase64: string
  validSignature: boolean
}

const FIXTURES = path.resolve(import.meta.dirname, '../../../tests/fixtures/interop/crypto')
const vectors = JSON.parse(
  readFileSync(path.join(FIXTURES, 'signature-fixtures.json'), 'utf8'),
) as Vector[]
const bytes = (b64: string) => new Uint8Array(Buffer.from(b64, 'base64'))

describe('verifySignature', () => {
  it('runs on libsecp256k1', () => {
    expect(signatureBackend()).toBe('libsecp256k1')
  })

  it.each(vectors.map((v) => [v.comment, v] as const))('%s', (_, v) => {
    const ok = verifySignature(v.publicKeyDid, bytes(v.messageBase64), bytes(v.signatureBase64))
    expect(ok).toBe(v.validSignature)
  })

  it.each([
    ['secp256k1', () => Secp256k1Keypair.create()],
    ['P-256', () => P256Keypair.create()],
  ])('accepts what @atproto/crypto signs with %s, and nothing else', async (_, create) => {
    const key = await create()
    const other = await create()
    const data = new TextEncoder().encode('a commit, or a label')
    const sig = await key.sign(data)
    expect(verifySignature(key.did(), data, sig)).toBe(true)
    expect(verifySignature(other.did(), data, sig)).toBe(false)
    expect(verifySignature(key.did(), new TextEncoder().encode('another'), sig)).toBe(false)
    expect(verifySignature('did:key:zNotAKey', data, sig)).toBe(false)
  })
})

describe('signingKeyOf', () => {
  it('takes a Multikey as published, as @atproto/identity would format it', async () => {
    const key = await Secp256k1Keypair.create()
    const did = 'did:plc:signingkeysigningkeysign'
    const multibase = key.did().slice('did:key:'.length)
    const doc = (type: string, publicKeyMultibase: string) => ({
      id: did,
      verificationMethod: [{ id: `${did}#atproto`, type, controller: did, publicKeyMultibase }],
    })
    const multikey = doc('Multikey', multibase)
    // The same did:key @atproto/identity formats, without its round trip through the point.
    expect(signingKeyOf(multikey)).toBe(key.did())
    expect(signingKeyOf(multikey)).toBe(getKey(multikey))
    expect(signingKeyOf({ id: did })).toBeUndefined()
  })
})
