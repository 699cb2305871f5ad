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
  it('weighs fetching every match against walking posts until a page matches', () => {
    // A million posts, a page of 26: the two cost alike near 1 %.
    expect(rareEnough(0, 1_000_000, 26)).toBe(true)
    expect(rareEnough(0.0007, 1_000_000, 26)).toBe(true)
    expect(rareEnough(0.009, 1_000_000, 26)).toBe(true)
    expect(rareEnough(0.011, 1_000_000, 26)).toBe(false)
    expect(rareEnough(0.05, 1_000_000, 26)).toBe(false)
    // On a small index everything is cheap to fetch.
    expect(rareEnough(0.5, 100, 26)).toBe(true)
  })
})
