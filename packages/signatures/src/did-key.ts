// The atproto signing key of a DID document, as a did:key. A Multikey already is one, as
// published; @atproto/identity's getKey decompresses and compresses it again in JavaScript, which
// costs more than checking a signature with it. Older key types go through getKey.
import { getSigningKey } from '@atproto/common-web'
import { getKey, type DidDocument } from '@atproto/identity'

export function signingKeyOf(doc: DidDocument): string | undefined {
  const material = getSigningKey(doc)
  if (material?.type === 'Multikey' && material.publicKeyMultibase.startsWith('z')) {
    return `did:key:${material.publicKeyMultibase}`
  }
  return getKey(doc)
}
