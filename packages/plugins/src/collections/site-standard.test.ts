import { describe, expect, it } from 'vitest'
import { InvalidRecordError } from '../lexicon.ts'
import { MemoryReader, refAt } from '../memory-reader.ts'
import type { Effects } from '../types.ts'
import { siteStandard } from './site-standard.ts'

// The stock indexes no site.standard record (its GetSiteStandardRecords* answer empty); these are
// kept in `record` so that ours can answer them, whatever the record's shape beyond an object.
const ALICE = 'did:plc:alicealicealicealicealic'
const CID = 'bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm'
const INDEXED = '2026-03-01T12:00:00.000Z'
const PUBLICATION = 'site.standard.publication'
const DOCUMENT = 'site.standard.document'
const URI = `at://${ALICE}/${DOCUMENT}/3kdoc0000001`

/** Every kind of effect, an absent one as empty, so a stray effect fails the comparison. */
const all = (e: Effects) => ({
  rows: e.rows ?? [],
  counters: e.counters ?? [],
  notifications: e.notifications ?? [],
  deleteNotificationsFor: e.deleteNotificationsFor ?? [],
})
const NONE = { rows: [], counters: [], notifications: [], deleteNotificationsFor: [] }

describe('site.standard.*', () => {
  it('is one plugin per collection, with no table of its own', () => {
    const document = siteStandard(DOCUMENT)
    expect(document.collection).toBe(DOCUMENT)
    expect(document.table).toBeNull()
    expect(siteStandard(PUBLICATION).collection).toBe(PUBLICATION)
    // Asked again, the same plugin: one per collection, not one per record.
    expect(siteStandard(DOCUMENT)).toBe(document)
  })

  it('takes any object as it is, with no lexicon to check it against', () => {
    const plugin = siteStandard(DOCUMENT)
    const rec = { $type: DOCUMENT, title: 'Hello', site: 'https://example.com', anything: [1] }
    expect(plugin.parse(rec)).toBe(rec)
    expect(plugin.parse({})).toEqual({})
  })

  it('refuses a record that is not an object', () => {
    const plugin = siteStandard(PUBLICATION)
    for (const bad of [null, undefined, 'text', 5, true, [], [{ $type: PUBLICATION }]]) {
      expect(() => plugin.parse(bad)).toThrow(InvalidRecordError)
    }
  })

  it('keeps a record at any rkey, and makes no row of it', () => {
    const plugin = siteStandard(DOCUMENT)
    const rec = plugin.parse({ $type: DOCUMENT, title: 'Hello' })
    const ref = refAt(URI, CID, INDEXED)
    expect(() => plugin.check?.(ref, rec)).not.toThrow()
    expect(() => plugin.toRow(new MemoryReader(), ref, rec)).toThrow()
  })

  it('has no effects on insert or delete', () => {
    const plugin = siteStandard(DOCUMENT)
    const rec = plugin.parse({ $type: DOCUMENT, title: 'Hello' })
    const row = {} as never
    const ref = refAt(URI, CID, INDEXED)
    expect(all(plugin.onInsert(new MemoryReader(), row, ref, rec))).toEqual(NONE)
    expect(all(plugin.onDelete(new MemoryReader(), row, null))).toEqual(NONE)
  })
})
