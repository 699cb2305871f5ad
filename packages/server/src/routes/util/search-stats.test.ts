import { describe, expect, it } from 'vitest'
import { lexemesOf, rareEnough } from './search-stats.ts'

describe('tsquery lexemes', () => {
  it('reads every quoted lexeme, quotes inside them too', () => {
    expect(lexemesOf("'cit' | 'citi' | 'city'")).toEqual(['cit', 'citi', 'city'])
    expect(lexemesOf("( 'a' <-> 'b' ) & !'it''s'")).toEqual(['a', 'b', "it's"])
    expect(lexemesOf('')).toEqual([])
  })
})

describe('rare enough to fetch every match', () => {
  it('takes a query as rare up to a few thousand matches', () => {
    expect(rareEnough(0, 1_000_000)).toBe(true)
    expect(rareEnough(0.0007, 1_000_000)).toBe(true)
    expect(rareEnough(0.002, 1_000_000)).toBe(true)
    expect(rareEnough(0.003, 1_000_000)).toBe(false)
    // On a small index everything is.
    expect(rareEnough(0.5, 100)).toBe(true)
  })
})
