// The few IPLD pieces emission needs, written directly: a DAG-CBOR writer (callers write map keys
// in DAG-CBOR order: shorter first, then bytewise), CIDv1 dag-cbor/sha2-256 of blocks, CARv1
// files and subscribeRepos message frames. Every emitted block goes through here, so it is kept
// allocation-light.
import { createHash } from 'node:crypto'

/** A CIDv1 (dag-cbor, sha2-256) as its 36 binary bytes held in a latin1 string: compact to keep. */
export type CidBin = string

const CID_PREFIX = '\x01\x71\x12\x20'
const BASE32 = 'abcdefghijklmnopqrstuvwxyz234567'

export function cidOf(bytes: Uint8Array): CidBin {
  return CID_PREFIX + createHash('sha256').update(bytes).digest('binary')
}

/** The multibase (base32, `b…`) string form, as URIs and APIs show CIDs. */
export function cidToString(cid: CidBin): string {
  let out = 'b'
  let bits = 0
  let value = 0
  for (let i = 0; i < cid.length; i++) {
    value = ((value << 8) | cid.charCodeAt(i)) & 0xffff
    bits += 8
    while (bits >= 5) {
      out += BASE32[(value >>> (bits - 5)) & 31]
      bits -= 5
    }
  }
  if (bits > 0) out += BASE32[(value << (5 - bits)) & 31]
  return out
}

/** A CID link inside a value written with `CborWriter.value`. */
export class Link {
  readonly cid: CidBin
  constructor(cid: CidBin) {
    this.cid = cid
  }
}

export type CborValue =
  | string
  | number
  | boolean
  | null
  | Uint8Array
  | Link
  | CborValue[]
  | { [key: string]: CborValue | undefined }

/** DAG-CBOR map key order: shorter keys first, then bytewise (keys here are ASCII). */
function dagCborKeyOrder(a: string, b: string): number {
  return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0)
}

export class CborWriter {
  private buf: Buffer
  private pos = 0

  constructor(size = 4096) {
    this.buf = Buffer.allocUnsafe(size)
  }

  private room(n: number): void {
    if (this.pos + n <= this.buf.length) return
    const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.pos + n))
    this.buf.copy(next, 0, 0, this.pos)
    this.buf = next
  }

  private head(major: number, n: number): void {
    this.room(9)
    const b = this.buf
    const m = major << 5
    if (n < 24) {
      b[this.pos++] = m | n
    } else if (n < 0x100) {
      b[this.pos++] = m | 24
      b[this.pos++] = n
    } else if (n < 0x10000) {
      b[this.pos++] = m | 25
      b.writeUInt16BE(n, this.pos)
      this.pos += 2
    } else if (n < 0x100000000) {
      b[this.pos++] = m | 26
      b.writeUInt32BE(n, this.pos)
      this.pos += 4
    } else {
      b[this.pos++] = m | 27
      b.writeUInt32BE(Math.floor(n / 0x100000000), this.pos)
      b.writeUInt32BE(n >>> 0, this.pos + 4)
      this.pos += 8
    }
  }

  uint(n: number): this {
    if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`not a uint: ${n}`)
    this.head(0, n)
    return this
  }

  /** A negative integer (frame headers carry op -1 for errors). */
  negint(n: number): this {
    this.head(1, -1 - n)
    return this
  }

  text(s: string): this {
    const len = Buffer.byteLength(s, 'utf8')
    this.head(3, len)
    this.room(len)
    this.pos += this.buf.write(s, this.pos, 'utf8')
    return this
  }

  bytes(b: Uint8Array): this {
    this.head(2, b.length)
    this.room(b.length)
    this.buf.set(b, this.pos)
    this.pos += b.length
    return this
  }

  /** Bytes given as a latin1 string (key suffixes, which are ASCII). */
  latin1Bytes(s: string): this {
    this.head(2, s.length)
    this.room(s.length)
    this.pos += this.buf.write(s, this.pos, 'latin1')
    return this
  }

  /** A CID link: tag 42 over the identity-multibase (0x00) prefixed CID bytes. */
  cid(cid: CidBin): this {
    this.room(5 + cid.length)
    const b = this.buf
    b[this.pos++] = 0xd8
    b[this.pos++] = 42
    b[this.pos++] = 0x58
    b[this.pos++] = cid.length + 1
    b[this.pos++] = 0
    this.pos += b.write(cid, this.pos, 'latin1')
    return this
  }

  cidOrNull(cid: CidBin | null): this {
    return cid === null ? this.null() : this.cid(cid)
  }

  null(): this {
    this.room(1)
    this.buf[this.pos++] = 0xf6
    return this
  }

  bool(v: boolean): this {
    this.room(1)
    this.buf[this.pos++] = v ? 0xf5 : 0xf4
    return this
  }

  map(n: number): this {
    this.head(5, n)
    return this
  }

  array(n: number): this {
    this.head(4, n)
    return this
  }

  /**
   * Any plain value in DAG-CBOR: maps get their keys in canonical order (shorter first, then
   * bytewise), integers only (DAG-CBOR records carry no floats), CID links as `Link`.
   */
  value(v: CborValue): this {
    if (v === null) return this.null()
    if (typeof v === 'string') return this.text(v)
    if (typeof v === 'boolean') return this.bool(v)
    if (typeof v === 'number') return v < 0 ? this.negint(v) : this.uint(v)
    if (v instanceof Link) return this.cid(v.cid)
    if (v instanceof Uint8Array) return this.bytes(v)
    if (Array.isArray(v)) {
      this.array(v.length)
      for (const item of v) this.value(item)
      return this
    }
    const keys = Object.keys(v).filter((k) => v[k] !== undefined)
    keys.sort(dagCborKeyOrder)
    this.map(keys.length)
    for (const k of keys) this.text(k).value(v[k]!)
    return this
  }

  /** The bytes written so far, copied out; the writer is empty again. */
  finish(): Buffer {
    const out = Buffer.allocUnsafe(this.pos)
    this.buf.copy(out, 0, 0, this.pos)
    this.pos = 0
    return out
  }
}

function varint(n: number, out: number[]): void {
  while (n >= 0x80) {
    out.push((n & 0x7f) | 0x80)
    n >>>= 7
  }
  out.push(n)
}

export interface Block {
  cid: CidBin
  bytes: Uint8Array
}

/** A CARv1 file with one root and the given blocks, in order. */
export function carFile(w: CborWriter, root: CidBin, blocks: Block[]): Buffer {
  const header = w.map(2).text('roots').array(1).cid(root).text('version').uint(1).finish()
  const prefix: number[] = []
  varint(header.length, prefix)
  let size = prefix.length + header.length
  const lens: number[][] = []
  for (const b of blocks) {
    const l: number[] = []
    varint(b.cid.length + b.bytes.length, l)
    lens.push(l)
    size += l.length + b.cid.length + b.bytes.length
  }
  const out = Buffer.allocUnsafe(size)
  let pos = 0
  for (const x of prefix) out[pos++] = x
  out.set(header, pos)
  pos += header.length
  for (let i = 0; i < blocks.length; i++) {
    for (const x of lens[i]!) out[pos++] = x
    pos += out.write(blocks[i]!.cid, pos, 'latin1')
    out.set(blocks[i]!.bytes, pos)
    pos += blocks[i]!.bytes.length
  }
  return out
}

/** A message frame of `type` ({op: 1, t} header, then the body), as subscribeRepos sends it. */
export function messageFrame(
  w: CborWriter,
  type: string,
  body: { [key: string]: CborValue | undefined },
): Buffer {
  const header = w.map(2).text('t').text(type).text('op').uint(1).finish()
  return Buffer.concat([header, w.value(body).finish()])
}
