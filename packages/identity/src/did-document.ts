// Whether a parsed JSON value is a DID document as @atproto/identity's resolvers accept one (the
// `didDocument` schema of @atproto/common-web), checked by hand: the schema's parse builds an
// object graph and, on every optional union it walks, error objects, which cost more than the
// rest of a directory lookup. Same answers, proven against the schema in did-document.test.ts.
import type { DidDocument } from '@atproto/identity'

const CONTEXT = 'https://www.w3.org/ns/did/v1'

type Obj = Record<string, unknown>

/** A plain object, as a zod object or record accepts (JSON gives no other kind). */
const isObject = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v)

const isStringArray = (v: unknown): boolean =>
  Array.isArray(v) && v.every((s) => typeof s === 'string')

const isUrl = (s: string): boolean => {
  try {
    new URL(s)
    return true
  } catch {
    return false
  }
}

function isVerificationMethod(v: unknown): boolean {
  if (!isObject(v)) return false
  if (typeof v.id !== 'string' || typeof v.type !== 'string' || typeof v.controller !== 'string')
    return false
  if (v.publicKeyJwk !== undefined && !isObject(v.publicKeyJwk)) return false
  return v.publicKeyMultibase === undefined || typeof v.publicKeyMultibase === 'string'
}

function isService(v: unknown): boolean {
  if (!isObject(v)) return false
  if (typeof v.id !== 'string' || typeof v.type !== 'string') return false
  return typeof v.serviceEndpoint === 'string' || isObject(v.serviceEndpoint)
}

const optionalArrayOf = (v: unknown, each: (item: unknown) => boolean): boolean =>
  v === undefined || (Array.isArray(v) && v.every(each))

export function isDidDocument(v: unknown): v is DidDocument {
  if (!isObject(v) || typeof v.id !== 'string') return false
  const context = v['@context']
  if (
    context !== undefined &&
    context !== CONTEXT &&
    !(Array.isArray(context) && context.every((c) => typeof c === 'string' && isUrl(c)))
  )
    return false
  if (v.alsoKnownAs !== undefined && !isStringArray(v.alsoKnownAs)) return false
  if (!optionalArrayOf(v.verificationMethod, isVerificationMethod)) return false
  if (!optionalArrayOf(v.authentication, (a) => typeof a === 'string' || isVerificationMethod(a)))
    return false
  return optionalArrayOf(v.service, isService)
}
