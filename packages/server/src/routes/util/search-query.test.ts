import { describe, expect, it } from 'vitest'
import { parsePostQuery } from './search-query.ts'

describe('parsePostQuery', () => {
  it('leaves words, phrases, exclusions and OR for the text match', () => {
    expect(parsePostQuery('  cats "big dogs"  -birds or fish ')).toEqual({
      text: 'cats "big dogs" -birds or fish',
      tags: [],
    })
  })

  it('lifts out every operator', () => {
    expect(
      parsePostQuery(
        'hello from:@Alice.test to:bob.test mentions:did:plc:abc lang:en-US since:2026-01-02 ' +
          'until:2026-02-03T04:05:06Z domain:www.Example.com #Cats #cats world',
      ),
    ).toEqual({
      text: 'hello world',
      author: 'alice.test',
      to: 'bob.test',
      mentions: 'did:plc:abc',
      lang: 'en',
      since: '2026-01-02T00:00:00.000Z',
      until: '2026-02-03T04:05:06.000Z',
      domain: 'example.com',
      tags: ['cats'],
    })
  })

  it('takes a bare DID as the author, and author: as from:', () => {
    expect(parsePostQuery('did:plc:xyz news').author).toBe('did:plc:xyz')
    expect(parsePostQuery('author:carol.test news')).toMatchObject({
      author: 'carol.test',
      text: 'news',
    })
  })

  it('drops operators whose value is not valid, instead of searching for them', () => {
    expect(
      parsePostQuery('from: lang:english since:yesterday until:2026-13-45 domain:nodot x'),
    ).toEqual({ text: 'x', tags: [] })
  })

  it('keeps colons inside quoted phrases and unknown prefixes as text', () => {
    expect(parsePostQuery('"from:alice" note:this').text).toBe('"from:alice" note:this')
  })

  it('treats a lone # as text', () => {
    expect(parsePostQuery('# hi')).toEqual({ text: '# hi', tags: [] })
  })
})
