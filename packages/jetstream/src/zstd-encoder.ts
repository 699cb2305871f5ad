// zstd frames made with Jetstream's dictionary by one kept context (zstd-context.ts): checked on
// samples first; where the kept context does not work, `zstdCompressSync`, slower, never wrong.
import zlib from 'node:zlib'
import { KeptContext } from './zstd-context.ts'

const OUT_BYTES = 64 * 1024

export class ZstdEncoder {
  private readonly dictionary: Buffer
  private readonly context: KeptContext
  private out = Buffer.allocUnsafe(OUT_BYTES)
  /** Whether the kept context works here (undefined: not tried yet). */
  private kept: boolean | undefined

  constructor(dictionary: Buffer) {
    this.dictionary = dictionary
    this.context = new KeptContext(() => zlib.createZstdCompress({ dictionary }))
  }

  /** `input` as one zstd frame made with the dictionary. */
  compress(input: Uint8Array): Buffer {
    if (this.kept === undefined) this.kept = this.selfCheck()
    if (!this.kept) return zlib.zstdCompressSync(input, { dictionary: this.dictionary })
    try {
      return this.keptCompress(input)
    } catch {
      this.context.drop()
      return zlib.zstdCompressSync(input, { dictionary: this.dictionary })
    }
  }

  private keptCompress(input: Uint8Array): Buffer {
    const parts: Buffer[] = []
    let inOffset = 0
    let inLeft = input.length
    for (;;) {
      const step = this.context.write(input, inOffset, inLeft, this.out)
      if (step.made > 0) parts.push(Buffer.from(this.out.subarray(0, step.made)))
      inOffset += inLeft - step.inLeft
      inLeft = step.inLeft
      // The frame is ended once the context stops filling the whole output.
      if (step.made < this.out.length) break
      this.out = Buffer.allocUnsafe(OUT_BYTES)
    }
    if (inLeft !== 0) throw new Error('zstd context left input unread')
    return parts.length === 1 ? parts[0]! : Buffer.concat(parts)
  }

  /** Whether frames from the kept context read back, alone, to what went in. */
  private selfCheck(): boolean {
    try {
      const samples = [
        Buffer.from('{"kind":"commit"}'),
        Buffer.alloc(200_000, 'ab'),
        Buffer.alloc(0),
      ]
      for (let round = 0; round < 2; round++) {
        for (const sample of samples) {
          const frame = this.keptCompress(sample)
          const back = zlib.zstdDecompressSync(frame, { dictionary: this.dictionary })
          if (!back.equals(sample)) return false
        }
      }
      return true
    } catch {
      this.context.drop()
      return false
    }
  }
}
