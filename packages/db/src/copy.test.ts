import { describe, expect, it } from 'vitest'
import { copyText } from './copy.ts'

describe('copyText: COPY text format', () => {
  it('writes a line per row, tab between columns, \\N for null, in the order asked', () => {
    const rows = [
      { a: 'x', b: null, c: 3 },
      { a: 'y', c: 0, b: undefined },
    ]
    expect(copyText(rows, ['c', 'a', 'b'])).toBe('3\tx\t\\N\n0\ty\t\\N\n')
  })

  it('escapes what COPY reads as structure, and leaves the rest as it is', () => {
    const rows = [{ a: 'tab\there\nline\r\\back', b: 'émoji 🦋 "quoted" ,;{}' }]
    expect(copyText(rows, ['a', 'b'])).toBe(
      'tab\\there\\nline\\r\\\\back\témoji 🦋 "quoted" ,;{}\n',
    )
  })

  it('gives other values the form pg gives parameters', () => {
    const when = new Date('2026-03-01T12:00:00.000Z')
    const rows = [
      { t: true, f: false, d: when, j: { k: 'v\tw' }, n: 1.5, x: new Uint8Array([1, 171]) },
    ]
    expect(copyText(rows, ['t', 'f', 'd', 'j', 'n', 'x'])).toBe(
      't\tf\t2026-03-01T12:00:00.000Z\t{"k":"v\\\\tw"}\t1.5\t\\\\x01ab\n',
    )
    expect(() => copyText([{ a: ['x'] }], ['a'])).toThrow(/column a/)
  })
})
