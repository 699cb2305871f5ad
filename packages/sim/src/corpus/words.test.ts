import { describe, expect, it } from 'vitest'
import { Rng } from '../rng.ts'
import { VOCABULARY, wordAt, words } from './words.ts'

describe('generated words', () => {
  it('have a vocabulary of distinct words, the common ones first', () => {
    expect(VOCABULARY).toHaveLength(20_000)
    expect(new Set(VOCABULARY).size).toBe(20_000)
    expect(VOCABULARY.slice(0, 3)).toEqual(['the', 'network', 'today'])
    expect(VOCABULARY.every((w) => /^[a-z]{3,}$/.test(w))).toBe(true)
  })

  it('are drawn by Zipf: the first word often, the tail rarely', () => {
    const rng = new Rng(7)
    const counts = new Map<string, number>()
    const n = 200_000
    for (const w of words(rng, n).split(' ')) counts.set(w, (counts.get(w) ?? 0) + 1)
    const the = counts.get('the')! / n
    expect(the).toBeGreaterThan(0.08)
    expect(the).toBeLessThan(0.14)
    // Most of the vocabulary shows up, most of it rarely.
    expect(counts.size).toBeGreaterThan(10_000)
    const once = [...counts.values()].filter((c) => c <= 2).length
    expect(once).toBeGreaterThan(counts.size / 4)
    expect(wordAt(0)).toBe('the')
    expect(wordAt(0.999_999_999)).toBe(VOCABULARY.at(-1))
  })

  it('take one draw of the generator per word', () => {
    const a = new Rng(1)
    const b = new Rng(1)
    words(a, 5)
    for (let i = 0; i < 5; i++) b.u32()
    expect(a.u32()).toBe(b.u32())
  })
})
