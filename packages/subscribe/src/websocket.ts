// The server's side of a WebSocket (RFC 6455), as the stream needs it: the opening handshake,
// frames sent built once (a server's frames are unmasked, so the same bytes suit every
// consumer, and a run of messages goes out in one write), and the client's frames read (masked;
// text, ping, close; fragments joined). Nothing is negotiated: no extension, no subprotocol.
import { createHash } from 'node:crypto'

const GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11'

export const OPCODE = {
  continuation: 0x0,
  text: 0x1,
  binary: 0x2,
  close: 0x8,
  ping: 0x9,
  pong: 0xa,
} as const

/** Close codes used here (RFC 6455 §7.4.1). */
export const CLOSE = {
  normal: 1000,
  goingAway: 1001,
  protocolError: 1002,
  invalidData: 1007,
  policy: 1008,
  tooBig: 1009,
  internal: 1011,
} as const

/** The 101 reply that completes the handshake for the client's Sec-WebSocket-Key. */
export function handshakeReply(key: string): string {
  const accept = createHash('sha1')
    .update(key + GUID)
    .digest('base64')
  return (
    'HTTP/1.1 101 Switching Protocols\r\n' +
    'Upgrade: websocket\r\n' +
    'Connection: Upgrade\r\n' +
    `Sec-WebSocket-Accept: ${accept}\r\n\r\n`
  )
}

/** A client key is 16 bytes in base64. */
export function validKey(key: string | undefined): key is string {
  return !!key && /^[A-Za-z0-9+/]{22}==$/.test(key)
}

function headerLength(length: number): number {
  return length < 126 ? 2 : length < 65_536 ? 4 : 10
}

function writeHeader(out: Buffer, opcode: number, length: number): number {
  out[0] = 0x80 | opcode
  if (length < 126) {
    out[1] = length
    return 2
  }
  if (length < 65_536) {
    out[1] = 126
    out.writeUInt16BE(length, 2)
    return 4
  }
  out[1] = 127
  out.writeUInt32BE(Math.floor(length / 2 ** 32), 2)
  out.writeUInt32BE(length >>> 0, 6)
  return 10
}

/** A whole unmasked frame holding `text` as UTF-8, in one buffer. */
export function textFrame(text: string): Buffer {
  const length = Buffer.byteLength(text)
  const out = Buffer.allocUnsafe(headerLength(length) + length)
  out.write(text, writeHeader(out, OPCODE.text, length), 'utf8')
  return out
}

/** A whole unmasked frame of `opcode` holding `payload`, in one buffer. */
export function frame(opcode: number, payload: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(headerLength(payload.length) + payload.length)
  out.set(payload, writeHeader(out, opcode, payload.length))
  return out
}

/** A close frame; the reason is cut to fit a control frame (123 bytes). */
export function closeFrame(code: number, reason: string): Buffer {
  let why = Buffer.from(reason, 'utf8')
  if (why.length > 123) why = why.subarray(0, 123)
  const payload = Buffer.allocUnsafe(2 + why.length)
  payload.writeUInt16BE(code, 0)
  payload.set(why, 2)
  return frame(OPCODE.close, payload)
}

/** What the client sent, one whole message or control frame. */
export type ClientMessage =
  | { type: 'text' | 'binary'; data: Buffer }
  | { type: 'ping' | 'pong'; data: Buffer }
  | { type: 'close'; code: number | undefined; reason: string }

/** The client broke the protocol; the connection is closed with `code`. */
export class ProtocolError extends Error {
  readonly code: number
  constructor(code: number, message: string) {
    super(message)
    this.code = code
  }
}

/** Reads the client's frames from the socket's chunks, however they are cut. */
export class FrameReader {
  private readonly maxMessageBytes: number
  private buffered: Buffer = Buffer.alloc(0)
  /** A fragmented message under way: its type and parts. */
  private fragments: { type: 'text' | 'binary'; parts: Buffer[]; bytes: number } | undefined

  constructor(maxMessageBytes: number) {
    this.maxMessageBytes = maxMessageBytes
  }

  /** The messages completed by this chunk. Throws ProtocolError. */
  push(chunk: Buffer): ClientMessage[] {
    this.buffered = this.buffered.length ? Buffer.concat([this.buffered, chunk]) : chunk
    const out: ClientMessage[] = []
    for (;;) {
      const got = this.next()
      if (!got) return out
      if (got !== true) out.push(got)
    }
  }

  /** One frame off the buffer: a message, true (a fragment taken), or undefined (need more). */
  private next(): ClientMessage | true | undefined {
    const b = this.buffered
    if (b.length < 2) return undefined
    const fin = (b[0]! & 0x80) !== 0
    if (b[0]! & 0x70) throw new ProtocolError(CLOSE.protocolError, 'reserved bits set')
    const opcode = b[0]! & 0x0f
    if (!(b[1]! & 0x80)) throw new ProtocolError(CLOSE.protocolError, 'client frame not masked')
    let length = b[1]! & 0x7f
    let at = 2
    if (length === 126) {
      if (b.length < 4) return undefined
      length = b.readUInt16BE(2)
      at = 4
    } else if (length === 127) {
      if (b.length < 10) return undefined
      const high = b.readUInt32BE(2)
      if (high > 0x1fffff) throw new ProtocolError(CLOSE.tooBig, 'frame too large')
      length = high * 2 ** 32 + b.readUInt32BE(6)
      at = 10
    }
    const control = opcode >= 0x8
    if (control && (length > 125 || !fin)) {
      throw new ProtocolError(CLOSE.protocolError, 'bad control frame')
    }
    if (length > this.maxMessageBytes) throw new ProtocolError(CLOSE.tooBig, 'message too large')
    if (b.length < at + 4 + length) return undefined
    const mask = b.subarray(at, at + 4)
    const data = Buffer.from(b.subarray(at + 4, at + 4 + length))
    for (let i = 0; i < data.length; i++) data[i]! ^= mask[i & 3]!
    this.buffered = b.subarray(at + 4 + length)
    switch (opcode) {
      case OPCODE.ping:
        return { type: 'ping', data }
      case OPCODE.pong:
        return { type: 'pong', data }
      case OPCODE.close: {
        if (data.length === 1) throw new ProtocolError(CLOSE.protocolError, 'bad close frame')
        const code = data.length >= 2 ? data.readUInt16BE(0) : undefined
        return { type: 'close', code, reason: data.subarray(2).toString('utf8') }
      }
      case OPCODE.text:
      case OPCODE.binary: {
        if (this.fragments) throw new ProtocolError(CLOSE.protocolError, 'fragment expected')
        const type = opcode === OPCODE.text ? 'text' : 'binary'
        if (fin) return { type, data }
        this.fragments = { type, parts: [data], bytes: data.length }
        return true
      }
      case OPCODE.continuation: {
        const f = this.fragments
        if (!f) throw new ProtocolError(CLOSE.protocolError, 'continuation without a message')
        f.parts.push(data)
        f.bytes += data.length
        if (f.bytes > this.maxMessageBytes) {
          throw new ProtocolError(CLOSE.tooBig, 'message too large')
        }
        if (!fin) return true
        this.fragments = undefined
        return { type: f.type, data: Buffer.concat(f.parts) }
      }
      default:
        throw new ProtocolError(CLOSE.protocolError, `unknown opcode ${opcode}`)
    }
  }
}
