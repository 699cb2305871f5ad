import { randomBytes } from 'node:crypto'
import zlib from 'node:zlib'
import { describe, expect, it } from 'vitest'
import { compressMessage, messageText, zstdDictionary } from './index.ts'
import { frameContentSize, ZstdDecoder } from './zstd-decoder.ts'
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

describe('zstd frames read with the kept context', () => {
  it('reads frames one after another, and a bad or short frame does not spoil the next', () => {
    const decoder = new ZstdDecoder(zstdDictionary())
    const texts = ['{"a":1}', 'y'.repeat(50_000), randomBytes(3000).toString('hex')]
    const frames = texts.map((t) => compressMessage(t))
    for (const f of frames) expect(frameContentSize(f)).toBeGreaterThanOrEqual(0)
    for (let round = 0; round < 2; round++) {
      texts.forEach((t, i) => expect(decoder.decompress(frames[i]!).toString()).toBe(t))
    }
    // A frame that stops short gives what it holds (zstdDecompressSync does not refuse it): never
    // the whole text, and the next frames still read whole.
    const short = frames[1]!.subarray(0, frames[1]!.length - 10)
    expect(decoder.decompress(short).toString()).not.toBe(texts[1])
    const corrupt = Buffer.from(frames[2]!)
    corrupt[corrupt.length - 5]! ^= 0xff
    let got: string | undefined
    try {
      got = decoder.decompress(corrupt).toString()
    } catch {
      got = undefined
    }
    expect(got).not.toBe(texts[2])
    texts.forEach((t, i) => expect(decoder.decompress(frames[i]!).toString()).toBe(t))
  })

  it('reads the content size from frame headers', () => {
    const frame = zlib.zstdCompressSync(Buffer.alloc(1000, 'a'), {
      params: { [zlib.constants.ZSTD_c_contentSizeFlag]: 1 },
    })
    expect(frameContentSize(frame)).toBe(1000)
    expect(frameContentSize(Buffer.from('not a frame'))).toBeUndefined()
  })
})
