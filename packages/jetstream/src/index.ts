// Jetstream's wire format (the `/subscribe` endpoint, v1): JSON messages, one per record op (the
// ops of one commit share its rev and time) plus identity and account messages; with
// `compress=true`, each message is one zstd frame made with Jetstream's published dictionary
// (data/README.md says where it comes from). Node's own zlib does zstd with dictionaries, so no
// native module is needed. The indexer reads this format (@openplane/ingest) and the toolkit
// serves it (@openplane/sim).
import { readFileSync } from 'node:fs'
import { ZstdDecoder } from './zstd-decoder.ts'
import { ZstdEncoder } from './zstd-encoder.ts'

export { frameContentSize, ZstdDecoder } from './zstd-decoder.ts'
export { ZstdEncoder } from './zstd-encoder.ts'

/** A commit op as Jetstream renders it (record and cid for creates and updates). */
export interface JetstreamCommit {
  rev: string
  operation: 'create' | 'update' | 'delete'
  collection: string
  rkey: string
  record?: unknown
  cid?: string
}

interface Base {
  did: string
  /** When Jetstream saw the event, in microseconds since the epoch: the cursor. */
  time_us: number
}

export type JetstreamMessage =
  | (Base & { kind: 'commit'; commit: JetstreamCommit })
  | (Base & {
      kind: 'identity'
      identity: { did: string; handle?: string; seq: number; time: string }
    })
  | (Base & {
      kind: 'account'
      account: { active: boolean; did: string; seq: number; time: string; status?: string }
    })

/** zstd's frame magic number, little-endian: a compressed message starts with it. */
const ZSTD_MAGIC = [0x28, 0xb5, 0x2f, 0xfd]

let dictionary: Buffer | undefined

/** Jetstream's zstd dictionary (read once). */
export function zstdDictionary(): Buffer {
  dictionary ??= readFileSync(new URL('../data/jetstream-zstd.dict', import.meta.url))
  return dictionary
}

let encoder: ZstdEncoder | undefined

/** A message as Jetstream sends it with `compress=true` (a zstd frame made with the dictionary). */
export function compressMessage(json: string | Uint8Array): Buffer {
  encoder ??= new ZstdEncoder(zstdDictionary())
  return encoder.compress(typeof json === 'string' ? Buffer.from(json) : json)
}

let decoder: ZstdDecoder | undefined

/** A message's JSON text, whether it came compressed or not. Throws on a corrupt frame. */
export function messageText(bytes: Uint8Array): string {
  if (!ZSTD_MAGIC.every((b, i) => bytes[i] === b)) {
    return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8')
  }
  decoder ??= new ZstdDecoder(zstdDictionary())
  return decoder.decompress(bytes).toString('utf8')
}

/** The subscription URL: `base` is Jetstream's address (its root, or …/subscribe). */
export function subscribeUrl(
  base: string,
  opts: { cursor?: number; compress: boolean; wantedCollections: string[] },
): URL {
  const url = new URL(base)
  if (!url.pathname.endsWith('/subscribe')) {
    url.pathname = url.pathname.replace(/\/?$/, '/subscribe')
  }
  for (const c of opts.wantedCollections) url.searchParams.append('wantedCollections', c)
  if (opts.compress) url.searchParams.set('compress', 'true')
  if (opts.cursor !== undefined) url.searchParams.set('cursor', String(opts.cursor))
  return url
}
