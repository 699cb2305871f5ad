import { describe, expect, it } from 'vitest'
import { lexemesOf } from './search-stats.ts'

describe('tsquery lexemes', () => {
  it('reads every quoted lexeme, quotes inside them too', () => {
    expect(lexemesOf("'cit' | 'citi' | 'city'")).toEqual(['cit', 'citi', 'city'])
    expect(lexemesOf("( 'a' <-> 'b' ) & !'it''s'")).toEqual(['a', 'b', "it's"])
    expect(lexemesOf('')).toEqual([])
  })
})
