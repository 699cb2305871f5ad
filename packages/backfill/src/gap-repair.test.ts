import { describe, expect, it } from 'vitest'
import { tidTime } from './gap-repair.ts'

/** A TID as the spec builds one: 53 bits of microseconds, 10 of clock id, base32-sortable. */
function tid(micros: bigint, clock = 0n): string {
  const S32 = '234567abcdefghijklmnopqrstuvwxyz'
  let v = (micros << 10n) | clock
  let out = ''
  for (let i = 0; i < 13; i++) {
    out = S32[Number(v & 31n)] + out
    v >>= 5n
  }
  return out
}

describe('tidTime', () => {
  it('reads the time a rev was made at', () => {
    const at = Date.parse('2026-11-29T11:30:00.123Z')
    expect(tidTime(tid(BigInt(at) * 1000n + 456n, 7n))).toBe(at + 0.456)
    expect(tidTime('2222222222222')).toBe(0)
    // A rev of the atproto spec's examples, made in 2023.
    expect(new Date(tidTime('3jzfcijpj2z2a')!).getUTCFullYear()).toBe(2023)
  })

  it('is undefined for what is not a TID', () => {
    expect(tidTime('3jzfcijpj2z2')).toBeUndefined()
    expect(tidTime('3jzfcijpj2z2aa')).toBeUndefined()
    expect(tidTime('3jzfcijpj2z21')).toBeUndefined()
    expect(tidTime('zzzzzzzzzzzzz')).toBeUndefined()
  })
})
