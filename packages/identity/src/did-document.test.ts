import { didDocument } from '@atproto/identity'
import { describe, expect, it } from 'vitest'
import { isDidDocument } from './did-document.ts'

const vm = { id: '#atproto', type: 'Multikey', controller: 'did:plc:a', publicKeyMultibase: 'zQ3' }
const svc = { id: '#atproto_pds', type: 'AtprotoPersonalDataServer', serviceEndpoint: 'https://p' }
const doc = {
  '@context': ['https://www.w3.org/ns/did/v1', 'https://w3id.org/security/multikey/v1'],
  id: 'did:plc:a',
  alsoKnownAs: ['at://a.test'],
  verificationMethod: [vm],
  service: [svc],
}

/** Each case changes one part of a valid document; the stock's schema is the judge. */
const cases: [string, unknown][] = [
  ['a PLC document', doc],
  ['the bare minimum', { id: 'did:plc:a' }],
  ['extra fields', { ...doc, extra: 1 }],
  ['no id', { ...doc, id: undefined }],
  ['a numeric id', { ...doc, id: 5 }],
  ['not an object', 'did:plc:a'],
  ['null', null],
  ['an array', [doc]],
  ['the one context string', { ...doc, '@context': 'https://www.w3.org/ns/did/v1' }],
  ['another context string', { ...doc, '@context': 'https://example.com/v1' }],
  ['a context that is not a URL', { ...doc, '@context': ['not a url'] }],
  ['a context of a number', { ...doc, '@context': [5] }],
  ['alsoKnownAs of a number', { ...doc, alsoKnownAs: [5] }],
  ['alsoKnownAs a string', { ...doc, alsoKnownAs: 'at://a.test' }],
  [
    'a method without controller',
    { ...doc, verificationMethod: [{ ...vm, controller: undefined }] },
  ],
  ['a method as a string', { ...doc, verificationMethod: ['#atproto'] }],
  ['a method with a JWK', { ...doc, verificationMethod: [{ ...vm, publicKeyJwk: { kty: 'EC' } }] }],
  ['a JWK that is a string', { ...doc, verificationMethod: [{ ...vm, publicKeyJwk: 'EC' }] }],
  ['a JWK that is an array', { ...doc, verificationMethod: [{ ...vm, publicKeyJwk: [] }] }],
  ['a numeric multibase', { ...doc, verificationMethod: [{ ...vm, publicKeyMultibase: 1 }] }],
  ['authentication by reference', { ...doc, authentication: ['#atproto'] }],
  ['authentication by method', { ...doc, authentication: [vm] }],
  ['authentication of a number', { ...doc, authentication: [1] }],
  ['an endpoint object', { ...doc, service: [{ ...svc, serviceEndpoint: { uri: 'https://p' } }] }],
  ['an endpoint array', { ...doc, service: [{ ...svc, serviceEndpoint: ['https://p'] }] }],
  ['an endpoint null', { ...doc, service: [{ ...svc, serviceEndpoint: null }] }],
  ['a service without type', { ...doc, service: [{ ...svc, type: undefined }] }],
  ['a service that is not a list', { ...doc, service: svc }],
  ['a null service list', { ...doc, service: null }],
]

describe('isDidDocument', () => {
  it.each(cases)('answers as the stock schema for %s', (_, value) => {
    const stock = didDocument.safeParse(value).success
    expect(isDidDocument(value)).toBe(stock)
  })

  it('covers both answers', () => {
    const answers = new Set(cases.map(([, v]) => isDidDocument(v)))
    expect(answers).toEqual(new Set([true, false]))
  })
})
