import { randomBytes } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import {
  closeFrame,
  frame,
  FrameReader,
  handshakeReply,
  OPCODE,
  ProtocolError,
  textFrame,
  validKey,
} from './websocket.ts'

/** A client's frame: masked, as RFC 6455 requires. */
function clientFrame(opcode: number, payload: Buffer, fin = true): Buffer {
  const mask = randomBytes(4)
  const len = payload.length
  const head =
    len < 126
      ? Buffer.from([(fin ? 0x80 : 0) | opcode, 0x80 | len])
      : Buffer.from([(fin ? 0x80 : 0) | opcode, 0x80 | 126, len >> 8, len & 0xff])
  const body = Buffer.from(payload.map((b, i) => b ^ mask[i & 3]!))
  return Buffer.concat([head, mask, body])
}

describe('websocket frames', () => {
  it('answers the RFC 6455 example key', () => {
    // RFC 6455 §1.3.
    expect(handshakeReply('dGhlIHNhbXBsZSBub25jZQ==')).toContain(
      'Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=',
    )
    expect(validKey('dGhlIHNhbXBsZSBub25jZQ==')).toBe(true)
    expect(validKey('short')).toBe(false)
  })

  it('frames text of each length class with the right header', () => {
    for (const n of [0, 125, 126, 65_535, 65_536, 200_000]) {
      const text = 'é'.repeat(Math.floor(n / 2)) + 'a'.repeat(n % 2)
      const f = textFrame(text)
      const bytes = Buffer.byteLength(text)
      expect(f[0]).toBe(0x81)
      const len7 = f[1]! & 0x7f
      const at = len7 < 126 ? 2 : len7 === 126 ? 4 : 10
      const length = len7 < 126 ? len7 : len7 === 126 ? f.readUInt16BE(2) : f.readUInt32BE(6)
      expect(length).toBe(bytes)
      expect(f.subarray(at).toString('utf8')).toBe(text)
    }
    expect(frame(OPCODE.binary, new Uint8Array([1, 2, 3]))).toEqual(Buffer.from([0x82, 3, 1, 2, 3]))
  })

  it('builds a close frame with code and a reason cut to fit', () => {
    const f = closeFrame(1008, 'x'.repeat(300))
    expect(f[0]).toBe(0x88)
    expect(f[1]).toBe(125)
    expect(f.readUInt16BE(2)).toBe(1008)
  })

  it('reads masked client frames however the chunks are cut, joining fragments', () => {
    const text = Buffer.from(JSON.stringify({ type: 'options_update', payload: {} }))
    const all = Buffer.concat([
      clientFrame(OPCODE.ping, Buffer.from('hi')),
      clientFrame(OPCODE.text, text.subarray(0, 10), false),
      clientFrame(OPCODE.continuation, text.subarray(10)),
      clientFrame(OPCODE.close, Buffer.from([0x03, 0xe8, 0x62, 0x79, 0x65])),
    ])
    const reader = new FrameReader(1 << 20)
    const got = []
    for (let i = 0; i < all.length; i += 3) got.push(...reader.push(all.subarray(i, i + 3)))
    expect(got).toEqual([
      { type: 'ping', data: Buffer.from('hi') },
      { type: 'text', data: text },
      { type: 'close', code: 1000, reason: 'bye' },
    ])
  })

  it('refuses unmasked frames, oversized messages and stray continuations', () => {
    const unmasked = Buffer.from([0x81, 0x01, 0x61])
    expect(() => new FrameReader(100).push(unmasked)).toThrow(ProtocolError)
    expect(() => new FrameReader(4).push(clientFrame(OPCODE.text, Buffer.from('hello')))).toThrow(
      /too large/,
    )
    expect(() =>
      new FrameReader(100).push(clientFrame(OPCODE.continuation, Buffer.from('a'))),
    ).toThrow(/continuation/)
    expect(() => new FrameReader(100).push(clientFrame(OPCODE.ping, Buffer.alloc(126)))).toThrow(
      /control/,
    )
  })
})
