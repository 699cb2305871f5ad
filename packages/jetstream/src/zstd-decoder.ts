// zstd frames made with Jetstream's dictionary, read by one kept context (zstd-context.ts). A
// context fed a frame that stops short would read the next message as the rest of it, so each
// frame's header must state its content size (Jetstream's do) and the output must come to exactly
// that; any other frame, or a mismatch, goes to `zstdDecompressSync` and the context is replaced.
import zlib from 'node:zlib'
import { KeptContext } from './zstd-context.ts'

const OUT_BYTES = 256 * 1024

/** The content size a zstd frame's header states, or undefined (absent, or not a frame). */
export function frameContentSize(frame: Uint8Array): number | undefined {
  if (frame.length < 6) return undefined
  if (frame[0] !== 0x28 || frame[1] !== 0xb5 || frame[2] !== 0x2f || frame[3] !== 0xfd) {
    return undefined
  }
  const descriptor = frame[4]!
  const fcsFlag = descriptor >> 6
  const singleSegment = (descriptor >> 5) & 1
  const dictFlag = descriptor & 3
  const fcsBytes = fcsFlag === 0 ? singleSegment : [0, 2, 4, 8][fcsFlag]!
  if (!fcsBytes) return undefined
  let at = 5 + (singleSegment ? 0 : 1) + [0, 1, 2, 4][dictFlag]!
  if (frame.length < at + fcsBytes) return undefined
  let size = 0
  for (let i = fcsBytes - 1; i >= 0; i--) size = size * 256 + frame[at + i]!
  at += fcsBytes
  return fcsBytes === 2 ? size + 256 : size
}

export class ZstdDecoder {
  private readonly dictionary: Buffer
  private readonly context: KeptContext
  private readonly out = Buffer.allocUnsafe(OUT_BYTES)
  private kept: boolean | undefined

  constructor(dictionary: Buffer) {
    this.dictionary = dictionary
    this.context = new KeptContext(() => zlib.createZstdDecompress({ dictionary }))
  }

  /** The frame's content. Throws on a corrupt frame. */
  decompress(frame: Uint8Array): Buffer {
    const size = frameContentSize(frame)
    if (size !== undefined && size <= OUT_BYTES) {
      if (this.kept === undefined) this.kept = this.selfCheck()
      if (this.kept) {
        const got = this.tryKept(frame, size)
        if (got) return got
      }
    }
    return zlib.zstdDecompressSync(frame, { dictionary: this.dictionary })
  }

  /** The content through the kept context, or undefined (the context then replaced). */
  private tryKept(frame: Uint8Array, size: number): Buffer | undefined {
    try {
      const { made, inLeft } = this.context.write(frame, 0, frame.length, this.out)
      if (inLeft !== 0 || made !== size) throw new Error('zstd frame not read whole')
      return Buffer.from(this.out.subarray(0, made))
    } catch {
      this.context.drop()
      return undefined
    }
  }

  /** Whether the kept context reads frames back, one after another. */
  private selfCheck(): boolean {
    const samples = ['{"kind":"commit"}', 'x'.repeat(100_000), '{"kind":"identity"}']
    for (const text of samples) {
      const frame = zlib.zstdCompressSync(Buffer.from(text), {
        dictionary: this.dictionary,
        params: { [zlib.constants.ZSTD_c_contentSizeFlag]: 1 },
      })
      const size = frameContentSize(frame)
      if (size !== text.length) return false
      const got = this.tryKept(frame, size)
      if (!got || got.toString() !== text) return false
    }
    return true
  }
}
