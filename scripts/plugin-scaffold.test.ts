import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { fuzzSequence, fuzzWeights, namesOf, pluginSource, registered } from './plugin-scaffold.ts'

const read = (path: string) => readFileSync(join(import.meta.dirname, '..', path), 'utf8')

describe('new:plugin scaffolding', () => {
  it('names a plugin from its NSID, and refuses what is not one', () => {
    expect(namesOf('com.example.feed.bookmarkList')).toEqual({
      nsid: 'com.example.feed.bookmarkList',
      file: 'bookmark-list',
      ident: 'bookmarkList',
      kind: 'bookmarklist',
    })
    expect(namesOf('com.example.post', 'example-post').ident).toBe('examplePost')
    for (const bad of ['com.example', 'com..example.x', '1com.example.x', 'com.example.9x']) {
      expect(() => namesOf(bad)).toThrow(/not an NSID/)
    }
    expect(() => namesOf('com.example.x', 'Bad_Name')).toThrow(/not a file name/)
  })

  it('registers the plugin after the last collection import and at the end of the list', () => {
    const names = namesOf('com.example.feed.bookmarkList')
    const out = registered(read('packages/plugins/src/registry.ts'), names)
    const lines = out.split('\n')
    const imported = lines.indexOf("import { bookmarkList } from './collections/bookmark-list.ts'")
    const listed = lines.indexOf('  bookmarkList,')
    expect(imported).toBeGreaterThan(
      lines.findIndex((l) => l.includes('./collections/verification.ts')),
    )
    expect(lines[listed + 1]).toBe('] as AnyPlugin[]')
    expect(() => registered(out, names)).toThrow(/already imports/)
  })

  it('adds a kind to the fuzzer: its collection, its record and its weight', () => {
    const names = namesOf('app.bsky.feed.bookmark')
    const sequence = fuzzSequence(read('tests/harness/fuzz/sequence.ts'), names)
    expect(sequence).toMatch(
      / {2}site: 'site\.standard\.document',\n {2}bookmark: 'app\.bsky\.feed\.bookmark',\n\} as const/,
    )
    expect(sequence).toContain("    case 'bookmark':\n      return { ...base }\n    case 'site':")
    expect(() => fuzzSequence(sequence, names)).toThrow(/already has a kind/)
    const weights = fuzzWeights(read('tests/harness/fuzz/generate.ts'), names)
    expect(weights).toContain("  ['site', 0.5],\n  ['bookmark', 0.5],\n]")
  })

  it('checks a record by its lexicon when one ships, by its type otherwise', () => {
    const names = namesOf('com.example.feed.bookmarkList')
    expect(pluginSource(names, true)).toContain(
      "parse: (record) => assertRecord('com.example.feed.bookmarkList', record)",
    )
    const own = pluginSource(names, false)
    expect(own).toContain("import { InvalidRecordError } from '../lexicon.ts'")
    expect(own).toContain("$type !== 'com.example.feed.bookmarkList'")
  })
})
