// The corpus's frames read back with @atcute's DAG-CBOR and CAR readers, the decoding stack the
// indexer uses: a frame's header and body as plain values, a commit's CAR as its blocks by CID.
// The toolkit writes with its own writer (emit/cbor.ts) and reads with these; only emit/verify.ts
// keeps @atproto/repo, as an independent check of what the writer emits.
import { fromUint8Array as readCar } from '@atcute/car'
import { BytesWrapper, decodeFirst } from '@atcute/cbor'
import { CidLinkWrapper, toString as cidString } from '@atcute/cid'

export type Obj = Record<string, unknown>

export interface FrameValues {
  /** The message type (`#commit`, `#identity`, …); undefined for an error frame. */
  t: string | undefined
  body: Obj
}

const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v)

/** A frame's header and body; undefined for bytes that are not a message frame. */
export function readFrame(payload: Uint8Array): FrameValues | undefined {
  const [header, rest] = decodeFirst(payload) as [unknown, Uint8Array]
  if (!isObj(header) || header.op !== 1) return undefined
  const [body] = decodeFirst(rest) as [unknown, Uint8Array]
  if (!isObj(body)) return undefined
  return { t: typeof header.t === 'string' ? header.t : undefined, body }
}

/** A link's CID as text (`b…`), or null for anything else. */
export function linkText(value: unknown): string | null {
  return value instanceof CidLinkWrapper ? value.$link : null
}

/** A bytes value's bytes; an empty array for anything else. */
export function bytesOf(value: unknown): Uint8Array {
  return value instanceof BytesWrapper ? value.buf : new Uint8Array(0)
}

/** A CAR's blocks by their CID's text. */
export function carBlocks(car: Uint8Array): Map<string, Uint8Array> {
  const out = new Map<string, Uint8Array>()
  for (const entry of readCar(car)) out.set(cidString(entry.cid), entry.bytes)
  return out
}
