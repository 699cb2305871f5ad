// Small helpers shared by the collection plugins, mirroring how the stock reads lex values.
import { InvalidRecordError } from '../lexicon.ts'
import { AtUri } from '../util.ts'

type Obj = Record<string, unknown>

export const isObj = (v: unknown): v is Obj => !!v && typeof v === 'object' && !Array.isArray(v)

/**
 * The stock's `$isTypeOf`: a value without `$type` counts as any union member. Records reaching
 * a plugin passed lexicon validation, so `$type` is present wherever a union needs it.
 */
export const isTypeOf = (v: unknown, type: string): boolean =>
  isObj(v) && (v.$type === undefined || v.$type === type)

/** CID of a blob ref, typed (`{$type: 'blob', ref}`) or legacy (`{cid}`), as the stock keeps it. */
export function blobCid(blob: unknown): string | undefined {
  if (!isObj(blob)) return undefined
  if ('$type' in blob) return String(blob.ref)
  return typeof blob.cid === 'string' ? blob.cid : undefined
}

/** The DID host of an at-uri; throws for a handle host, as the stock's `uriToDid` does. */
export const uriToDid = (uri: string): string => new AtUri(uri).did

/** JSON text for a jsonb column, or null for an absent or empty list (as the stock writes). */
export const jsonList = (list: readonly string[] | undefined): string | null =>
  list?.length ? JSON.stringify(list) : null

/** The uri of a post's gate record (threadgate / postgate share the post's rkey). */
export function gateUriOf(postUri: string, gate: 'threadgate' | 'postgate'): string {
  const uri = new AtUri(postUri)
  if (uri.collection === 'app.bsky.feed.post') uri.collection = `app.bsky.feed.${gate}`
  return uri.toString()
}

/** An at-uri of a record's field; an unparseable one makes the record invalid. */
export function parseUri(uri: string, what: string): AtUri {
  try {
    return new AtUri(uri)
  } catch (err) {
    throw new InvalidRecordError(`bad ${what} uri ${uri}: ${(err as Error).message}`)
  }
}
