// The corpus file: firehose messages stored exactly as they go on the wire, each already wrapped
// in its WebSocket frame (server frames are unmasked, so the bytes are the same for every
// consumer and a replay writes file ranges to sockets without touching them).
//
//   "OPFIREHOSE1\n"  u32 header length  header JSON (what was generated, by which parameters)
//   frames           WebSocket binary frames, back to back
//   index            per frame: seq, byte offset, event time (ms) as float64 (24 bytes)
//   summary JSON     counts, time range, sha256 of the messages
//   footer (40 B)    u64 index offset, u64 frames, u64 summary offset, u32 summary length,
//                    "OPFHEND\n"
import { createHash, type Hash } from 'node:crypto'
import { open, type FileHandle } from 'node:fs/promises'

const MAGIC = Buffer.from('OPFIREHOSE1\n')
const END = Buffer.from('OPFHEND\n')
const FOOTER = 40

export interface CorpusHeader {
  format: 1
  /** What made it (the generator's parameters, or a recording's source). */
  source: Record<string, unknown>
  /** Users of the userbase whose identities the replay server answers for (1..users). */
  users: number
  seed: number
  handle_domain: string
}

export interface CorpusSummary {
  frames: number
  first_seq: number
  last_seq: number
  first_time: string
  last_time: string
  bytes: number
  /** sha256 over the messages (frame payloads) in order: equal corpora, equal hashes. */
  sha256: string
  counts: Record<string, number>
  /** `publicKeyMultibase` of every user with a commit, by user id (saves deriving them). */
  public_keys?: Record<string, string>
}

/** The WebSocket framing of a binary message from a server (FIN, opcode 2, no mask). */
export function wsBinaryFrame(payload: Uint8Array): Buffer {
  return wsFrame(payload, 0x2)
}

/** One unmasked, final WebSocket frame of the given opcode (1: text, 2: binary). */
export function wsFrame(payload: Uint8Array, opcode: 0x1 | 0x2): Buffer {
  const n = payload.length
  const first = 0x80 | opcode
  const head = n < 126 ? Buffer.from([first, n]) : n < 65536 ? Buffer.alloc(4) : Buffer.alloc(10)
  if (n >= 126 && n < 65536) {
    head[0] = first
    head[1] = 126
    head.writeUInt16BE(n, 2)
  } else if (n >= 65536) {
    head[0] = first
    head[1] = 127
    head.writeBigUInt64BE(BigInt(n), 2)
  }
  return Buffer.concat([head, payload])
}

/** Length of the WebSocket header at the start of `frame` (2, 4 or 10 bytes). */
export function wsHeaderLength(frame: Uint8Array): number {
  const len = frame[1]! & 0x7f
  return len < 126 ? 2 : len === 126 ? 4 : 10
}

export class CorpusWriter {
  private readonly fh: FileHandle
  private offset: number
  private readonly index: number[] = []
  private readonly hash: Hash = createHash('sha256')
  private buffered: Buffer[] = []
  private bufferedBytes = 0
  private firstTime = ''
  private lastTime = ''

  private constructor(fh: FileHandle, offset: number) {
    this.fh = fh
    this.offset = offset
  }

  static async create(file: string, header: CorpusHeader): Promise<CorpusWriter> {
    const fh = await open(file, 'w')
    const json = Buffer.from(JSON.stringify(header))
    const len = Buffer.alloc(4)
    len.writeUInt32BE(json.length)
    const head = Buffer.concat([MAGIC, len, json])
    await fh.write(head)
    return new CorpusWriter(fh, head.length)
  }

  get frames(): number {
    return this.index.length / 3
  }

  /** Appends one message (a frame as subscribeRepos sends it) with its seq and event time. */
  async add(seq: number, time: string, message: Uint8Array): Promise<void> {
    const last = this.index.length ? this.index[this.index.length - 3]! : -1
    if (seq <= last) throw new Error(`seq ${seq} is not after ${last}`)
    const frame = wsBinaryFrame(message)
    this.hash.update(message)
    this.index.push(seq, this.offset, Date.parse(time))
    if (!this.firstTime) this.firstTime = time
    this.lastTime = time
    this.offset += frame.length
    this.buffered.push(frame)
    this.bufferedBytes += frame.length
    if (this.bufferedBytes >= 1 << 20) await this.flush()
  }

  private async flush(): Promise<void> {
    if (!this.buffered.length) return
    const data = Buffer.concat(this.buffered)
    this.buffered = []
    this.bufferedBytes = 0
    await this.fh.write(data)
  }

  async finish(
    counts: Record<string, number>,
    publicKeys?: Record<string, string>,
  ): Promise<CorpusSummary> {
    await this.flush()
    const frames = this.frames
    const summary: CorpusSummary = {
      frames,
      first_seq: frames ? this.index[0]! : 0,
      last_seq: frames ? this.index[this.index.length - 3]! : 0,
      first_time: this.firstTime,
      last_time: this.lastTime,
      bytes: this.offset,
      sha256: this.hash.digest('hex'),
      counts,
      ...(publicKeys ? { public_keys: publicKeys } : {}),
    }
    const indexOffset = this.offset
    const index = Buffer.from(new Float64Array(this.index).buffer)
    const json = Buffer.from(JSON.stringify(summary))
    const footer = Buffer.alloc(FOOTER)
    footer.writeBigUInt64BE(BigInt(indexOffset), 0)
    footer.writeBigUInt64BE(BigInt(frames), 8)
    footer.writeBigUInt64BE(BigInt(indexOffset + index.length), 16)
    footer.writeUInt32BE(json.length, 24)
    END.copy(footer, 32)
    await this.fh.write(Buffer.concat([index, json, footer]))
    await this.fh.close()
    return summary
  }

  /** Closes without a footer (the file is then unreadable as a corpus). */
  async abort(): Promise<void> {
    await this.fh.close().catch(() => undefined)
  }
}

export class CorpusReader {
  readonly file: string
  readonly header: CorpusHeader
  readonly summary: CorpusSummary
  /** seq, offset, time (ms) per frame. */
  private readonly index: Float64Array
  private readonly fh: FileHandle
  /** Where the frames end (the index starts). */
  private readonly end: number

  private constructor(
    file: string,
    fh: FileHandle,
    header: CorpusHeader,
    summary: CorpusSummary,
    index: Float64Array,
    end: number,
  ) {
    this.file = file
    this.fh = fh
    this.header = header
    this.summary = summary
    this.index = index
    this.end = end
  }

  static async open(file: string): Promise<CorpusReader> {
    const fh = await open(file, 'r')
    try {
      const { size } = await fh.stat()
      const fail = (why: string) => new Error(`${file} is not a firehose corpus: ${why}`)
      if (size < MAGIC.length + 4 + FOOTER) throw fail('too short')
      const start = await readAt(fh, 0, MAGIC.length + 4)
      if (!start.subarray(0, MAGIC.length).equals(MAGIC)) throw fail('bad magic')
      const headerLen = start.readUInt32BE(MAGIC.length)
      const header = JSON.parse(
        (await readAt(fh, MAGIC.length + 4, headerLen)).toString('utf8'),
      ) as CorpusHeader
      const footer = await readAt(fh, size - FOOTER, FOOTER)
      if (!footer.subarray(32).equals(END)) throw fail('no footer (an unfinished recording?)')
      const indexOffset = Number(footer.readBigUInt64BE(0))
      const frames = Number(footer.readBigUInt64BE(8))
      const summaryOffset = Number(footer.readBigUInt64BE(16))
      const summaryLen = footer.readUInt32BE(24)
      const raw = await readAt(fh, indexOffset, frames * 24)
      const index = new Float64Array(frames * 3)
      new Uint8Array(index.buffer).set(raw)
      const summary = JSON.parse(
        (await readAt(fh, summaryOffset, summaryLen)).toString('utf8'),
      ) as CorpusSummary
      return new CorpusReader(file, fh, header, summary, index, indexOffset)
    } catch (err) {
      await fh.close()
      throw err
    }
  }

  get frames(): number {
    return this.index.length / 3
  }

  seqAt(i: number): number {
    return this.index[i * 3]!
  }

  timeAt(i: number): number {
    return this.index[i * 3 + 2]!
  }

  offsetAt(i: number): number {
    return i >= this.frames ? this.end : this.index[i * 3 + 1]!
  }

  /** Index of the first frame whose seq is greater than `seq`. */
  after(seq: number): number {
    let lo = 0
    let hi = this.frames
    while (lo < hi) {
      const mid = (lo + hi) >>> 1
      if (this.seqAt(mid) <= seq) lo = mid + 1
      else hi = mid
    }
    return lo
  }

  /** The wire bytes (WebSocket frames) of frames [from, to). */
  read(from: number, to: number): Promise<Buffer> {
    const start = this.offsetAt(from)
    return readAt(this.fh, start, this.offsetAt(to) - start)
  }

  /** Each message (frame payload) in order, with its seq: for checks and offline consumers. */
  async *messages(from = 0, to = this.frames): AsyncGenerator<{ seq: number; bytes: Buffer }> {
    for (let i = from; i < to;) {
      const end = Math.min(to, i + 2048)
      const chunk = await this.read(i, end)
      const base = this.offsetAt(i)
      for (let j = i; j < end; j++) {
        const frame = chunk.subarray(this.offsetAt(j) - base, this.offsetAt(j + 1) - base)
        yield { seq: this.seqAt(j), bytes: frame.subarray(wsHeaderLength(frame)) }
      }
      i = end
    }
  }

  close(): Promise<void> {
    return this.fh.close()
  }
}

async function readAt(fh: FileHandle, position: number, length: number): Promise<Buffer> {
  const buf = Buffer.allocUnsafe(length)
  let done = 0
  while (done < length) {
    const { bytesRead } = await fh.read(buf, done, length - done, position + done)
    if (bytesRead === 0) throw new Error(`unexpected end of file at ${position + done}`)
    done += bytesRead
  }
  return buf
}
