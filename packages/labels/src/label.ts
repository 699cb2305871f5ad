// One label from a labeler's stream: its shape checked, its signature verified against the
// labeler's #atproto_label key. A label that fails either is refused with its reason (counted and
// logged by the consumer); it never reaches the table and never stops the stream.
import { verifySignature } from '@atproto/crypto'
import { encode } from '@atproto/lex-cbor'
import { ensureValidAtUri, ensureValidDid } from '@atproto/syntax'
import type { Label } from '@openplane/db'

/** A label as the stock's `label` table holds it (`cid` '' when the label names no version). */
export type LabelRow = Label

export type Checked =
  | { ok: true; row: LabelRow; signed: Uint8Array; sig: Uint8Array }
  | { ok: false; reason: 'invalid'; detail: string }

type Obj = Record<string, unknown>
const isObj = (v: unknown): v is Obj => !!v && typeof v === 'object' && !Array.isArray(v)
const isTime = (v: unknown): v is string =>
  typeof v === 'string' && v.length <= 64 && !Number.isNaN(Date.parse(v))

function validSubject(uri: string): boolean {
  try {
    if (uri.startsWith('did:')) ensureValidDid(uri)
    else ensureValidAtUri(uri)
    return true
  } catch {
    return false
  }
}

/**
 * The label's fields, and the bytes its signature covers: the label without `sig`, in DAG-CBOR,
 * as labelers sign it (version 1; `neg` only when true; absent fields left out).
 */
export function checkLabel(raw: unknown, labeler: string): Checked {
  const bad = (detail: string): Checked => ({ ok: false, reason: 'invalid', detail })
  if (!isObj(raw)) return bad('not an object')
  const { ver, src, uri, cid, val, neg, cts, exp, sig } = raw
  if (src !== labeler) return bad(`src ${String(src)} is not the labeler`)
  if (typeof uri !== 'string' || !validSubject(uri)) return bad('uri is not a DID or AT URI')
  if (cid !== undefined && (typeof cid !== 'string' || !/^[a-z0-9]{8,128}$/i.test(cid))) {
    return bad('cid is not a CID')
  }
  if (typeof val !== 'string' || val.length === 0 || val.length > 128) {
    return bad('val is not a label value')
  }
  if (neg !== undefined && typeof neg !== 'boolean') return bad('neg is not a boolean')
  if (!isTime(cts)) return bad('cts is not a datetime')
  if (exp !== undefined && !isTime(exp)) return bad('exp is not a datetime')
  if (ver !== undefined && ver !== 1) return bad(`unknown version ${String(ver)}`)
  if (!(sig instanceof Uint8Array)) return bad('no signature')
  // Postgres text cannot hold NUL.
  if ([uri, val, cts, exp ?? ''].some((s) => (s as string).includes('\u0000'))) {
    return bad('NUL in a field')
  }
  const unsigned: Obj = { ver: ver ?? 1, src, uri, val, cts }
  if (cid !== undefined) unsigned.cid = cid
  if (neg === true) unsigned.neg = true
  if (exp !== undefined) unsigned.exp = exp
  return {
    ok: true,
    row: {
      src,
      uri,
      cid: (cid as string | undefined) ?? '',
      val,
      neg: neg === true,
      cts,
      exp: (exp as string | undefined) ?? null,
    },
    signed: encode(unsigned as never),
    sig,
  }
}

/** Whether `key` (a did:key) signed these bytes. Malformed signatures are simply not valid. */
export async function signedBy(key: string, signed: Uint8Array, sig: Uint8Array): Promise<boolean> {
  try {
    return await verifySignature(key, signed, sig)
  } catch {
    return false
  }
}
