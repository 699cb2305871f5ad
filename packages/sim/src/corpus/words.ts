// Words for generated post text, drawn as people's words are: a few very common, a long tail of
// rare ones (Zipf's law over a 20,000-word vocabulary). Searching such text is what search costs
// on a real network: a common word matches every other post, a rare one a handful in a million.
import type { Rng } from '../rng.ts'

/** The commonest words, most frequent first. */
const COMMON = [
  'the', 'network', 'today', 'morning', 'coffee', 'thread', 'photo', 'sky', 'open', 'post',
  'really', 'good', 'new', 'people', 'city', 'music', 'game', 'read', 'write', 'code',
] // prettier-ignore

const SIZE = 20_000
/** Zipf's exponent: word r is drawn with weight 1 / r^S. */
const S = 1.07

const ONSETS = ['b', 'd', 'f', 'g', 'k', 'l', 'm', 'n', 'p', 'r', 's', 't', 'v', 'z', 'sh', 'tr']
const VOWELS = ['a', 'e', 'i', 'o', 'u', 'ai', 'ou']
const CODAS = ['', 'n', 'r', 's', 'l', 'k']

/** The vocabulary by rank: the common words, then made-up words of two or three syllables. */
export const VOCABULARY: readonly string[] = (() => {
  const out = [...COMMON]
  const seen = new Set(out)
  const syllables = ONSETS.flatMap((o) => VOWELS.flatMap((v) => CODAS.map((c) => o + v + c)))
  for (let i = 0; out.length < SIZE; i++) {
    // Digits of i in base (syllable count) are the word's syllables: deterministic, distinct.
    let n = i
    let word = ''
    do {
      word += syllables[n % syllables.length]
      n = Math.floor(n / syllables.length)
    } while (n > 0 || word.length < 4)
    if (!seen.has(word)) {
      seen.add(word)
      out.push(word)
    }
  }
  return out
})()

/** Cumulative weights, for drawing a rank by binary search. */
const CUMULATIVE = (() => {
  const out = new Float64Array(SIZE)
  let sum = 0
  for (let r = 0; r < SIZE; r++) out[r] = sum += 1 / (r + 1) ** S
  for (let r = 0; r < SIZE; r++) out[r]! /= sum
  return out
})()

/** The word at the quantile `u` in [0, 1) of the distribution. */
export function wordAt(u: number): string {
  let lo = 0
  let hi = SIZE - 1
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    if (CUMULATIVE[mid]! > u) hi = mid
    else lo = mid + 1
  }
  return VOCABULARY[lo]!
}

/** `n` words, one draw of the generator each (as one `int` draw was: corpora keep their events). */
export function words(rng: Rng, n: number): string {
  const out: string[] = []
  for (let i = 0; i < n; i++) out.push(wordAt(rng.u32() / 2 ** 32))
  return out.join(' ')
}

/** A generated post's text: who wrote it, then 3 to 14 words. */
export function postText(rng: Rng, user: number): string {
  return `post by user${user}: ${words(rng, 3 + rng.int(12))}`
}
