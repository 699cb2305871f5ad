// One subscriber of the replay server's stream (replay.ts): where it is in the corpus, what a
// Jetstream subscriber asked for, and the WebSocket side of its socket (the few control frames a
// client sends; the info and error frames the server sends).
import type { Socket } from 'node:net'
import { CborWriter, messageFrame } from '../emit/cbor.ts'
import { wsBinaryFrame } from './file.ts'

/** What a Jetstream consumer asked for. */
export interface JetstreamWants {
  compress: boolean
  collections: string[]
}

/** One subscriber: where it is in the corpus, and the few control frames it may send. */
export class Consumer {
  readonly socket: Socket
  next = 0
  sent = 0
  /** Bytes written to it (WebSocket frames). */
  bytes = 0
  /** Set for a Jetstream consumer: what it asked for. */
  jetstream: JetstreamWants | undefined
  closed = false
  private incoming: Buffer = Buffer.alloc(0)

  constructor(socket: Socket) {
    this.socket = socket
    socket.on('data', (data: Buffer) => this.onData(data))
    socket.on('error', () => socket.destroy())
  }

  drained(): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        this.socket.off('drain', done)
        this.socket.off('close', done)
        resolve()
      }
      this.socket.on('drain', done)
      this.socket.on('close', done)
    })
  }

  /** An info frame ({op: 1, t: '#info'} header, {name, message} body); the stream goes on. */
  info(name: string, message: string): void {
    this.socket.write(wsBinaryFrame(messageFrame(new CborWriter(), '#info', { name, message })))
  }

  /** An error frame ({op: -1} header, {error, message} body), then a normal close. */
  fail(error: string, message: string): void {
    const w = new CborWriter()
    w.map(1).text('op').negint(-1)
    w.map(2).text('error').text(error).text('message').text(message)
    this.socket.write(wsBinaryFrame(w.finish()))
    this.close(1000)
  }

  private close(code: number): void {
    if (this.closed) return
    this.closed = true
    this.socket.end(Buffer.from([0x88, 2, code >> 8, code & 0xff]))
  }

  /** Client frames are masked; only close and ping need an answer. */
  private onData(data: Buffer): void {
    this.incoming = this.incoming.length ? Buffer.concat([this.incoming, data]) : data
    for (;;) {
      const b = this.incoming
      if (b.length < 2) return
      const opcode = b[0]! & 0x0f
      let len = b[1]! & 0x7f
      let pos = 2
      if (len === 126) {
        if (b.length < 4) return
        len = b.readUInt16BE(2)
        pos = 4
      } else if (len === 127) {
        if (b.length < 10) return
        len = Number(b.readBigUInt64BE(2))
        pos = 10
      }
      const masked = (b[1]! & 0x80) !== 0
      const maskAt = pos
      if (masked) pos += 4
      if (b.length < pos + len) return
      const payload = Buffer.from(b.subarray(pos, pos + len))
      if (masked) for (let i = 0; i < len; i++) payload[i]! ^= b[maskAt + (i & 3)]!
      this.incoming = b.subarray(pos + len)
      if (opcode === 0x8) {
        this.close(payload.length >= 2 ? payload.readUInt16BE(0) : 1000)
        return
      }
      if (opcode === 0x9 && payload.length < 126) {
        this.socket.write(Buffer.concat([Buffer.from([0x8a, payload.length]), payload]))
      }
    }
  }
}
