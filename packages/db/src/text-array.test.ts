import { describe, expect, it } from 'vitest'
import { textArray } from './text-array.ts'

describe('textArray', () => {
  it('writes plain elements in one join', () => {
    expect(textArray(['did:plc:a', 'at://did:plc:a/app.bsky.feed.post/1'])).toBe(
      '{"did:plc:a","at://did:plc:a/app.bsky.feed.post/1"}',
    )
  })
  it('writes an empty array', () => {
    expect(textArray([])).toBe('{}')
  })
  it('escapes quotes and backslashes, and keeps nulls unquoted', () => {
    expect(textArray(['a"b', 'c\\d', null, 'e, {f}'])).toBe('{"a\\"b","c\\\\d",NULL,"e, {f}"}')
  })
  it('keeps an element that reads NULL as text', () => {
    expect(textArray(['NULL'])).toBe('{"NULL"}')
  })
})
