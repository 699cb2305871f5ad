import { randomBytes } from 'node:crypto'
import zlib from 'node:zlib'
import { describe, expect, it } from 'vitest'
import { compressMessage, messageText, zstdDictionary } from './index.ts'
import { ZstdEncoder } from './zstd-encoder.ts'

describe('zstd frames with the kept context', () => {
  it('makes frames that read back alone, message after message, small and large', () => {
    const encoder = new ZstdEncoder(zstdDictionary())
    const inputs = [
      '{"did":"did:plc:a","time_us":1,"kind":"identity"}',
      '',
      'x'.repeat(300_000),
      randomBytes(100_000).toString('base64'),
      JSON.stringify({ kind: 'commit', commit: { record: { text: 'é'.repeat(1000) } } }),
    ]
    for (let round = 0; round < 3; round++) {
      for (const text of inputs) {
        const frame = encoder.compress(Buffer.from(text))
        expect(zlib.zstdDecompressSync(frame, { dictionary: zstdDictionary() }).toString()).toBe(
          text,
        )
      }
    }
  })

  it('is what compressMessage sends, and what messageText reads', () => {
    const json = '{"did":"did:plc:b","time_us":2,"kind":"account"}'
    expect(messageText(compressMessage(json))).toBe(json)
    expect(compressMessage(json).length).toBeLessThan(json.length)
  })
})
