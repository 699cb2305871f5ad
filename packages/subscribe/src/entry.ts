// One published message as the stream sends it: its WebSocket frame made once, and its
// compressed frame (zstd with Jetstream's dictionary) made once when a consumer first wants it;
// every consumer is sent these same bytes.
import type { PublishedEvent } from '@openplane/db'
import { compressMessage } from '@openplane/jetstream'
import { frame, OPCODE, textFrame } from './websocket.ts'

export class Entry {
  readonly timeUs: number
  readonly did: string
  readonly collection: string | null
  /** The message's JSON size in bytes (what maxMessageSizeBytes is judged on). */
  readonly bytes: number
  /** The text frame. */
  readonly text: Buffer
  private compressed: Buffer | undefined

  constructor(e: PublishedEvent) {
    this.timeUs = e.timeUs
    this.did = e.did
    this.collection = e.collection
    this.text = textFrame(e.message)
    this.bytes = payloadOf(this.text).length
  }

  /** The frame for a consumer that asked for compression or not. */
  frame(compress: boolean): Buffer {
    if (!compress) return this.text
    this.compressed ??= frame(OPCODE.binary, compressMessage(payloadOf(this.text)))
    return this.compressed
  }

  /**
   * Memory the entry may hold: its text frame, room for a compressed one (zstd with the
   * dictionary makes these messages about a third of their size; half is kept), and the object.
   */
  get size(): number {
    return this.text.length * 1.5 + 96
  }
}

/** A frame's payload: what follows its (unmasked) header. */
function payloadOf(f: Buffer): Buffer {
  const n = f[1]! & 0x7f
  return f.subarray(n < 126 ? 2 : n === 126 ? 4 : 10)
}
