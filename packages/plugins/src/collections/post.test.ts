import { lexParse } from '@atproto/lex-json'
import type { Selectable } from 'kysely'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { MemoryReader, refAt } from '../memory-reader.ts'
import type { Counter, TableName, Tables, WhereValue } from '../types.ts'
import { AtUri } from '../util.ts'
import { post } from './post.ts'
import { contextOf } from './post-context.ts'

type PostRow = Selectable<Tables['post']>

const ALICE = 'did:plc:alicealicealicealicealic'
const BOB = 'did:plc:bobbobbobbobbobbobbobbobb'
const CAROL = 'did:plc:carolcarolcarolcarolcaro'
const DAN = 'did:plc:dandandandandandandandanda'
const ERIN = 'did:plc:erinerinerinerinerinerine'
const FRANK = 'did:plc:frankfrankfrankfrankfran'
const GRACE = 'did:plc:gracegracegracegracegrac'
const CID = 'bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm'
const CID2 = 'bafyreidfayvfuwqa7qlnopdjiqrxzs6blmoeu4rujcjtnci5beludirz2a'
const IMG1 = 'bafkreibme22gw2h7y2h7tg2fhqotaqjucnbc24deqo72b6mkl2egezxhvy'
const IMG2 = 'bafkreiaxmkxnxm5cjoxwkhxsqskd6i24xemvvwuklqyvnrdc2vp5mxldky'
const CREATED = '2026-03-01T11:00:00.000Z'
const INDEXED = '2026-03-01T12:00:00.000Z'
const EARLIER = '2026-03-01T10:00:00.000Z'

const postAt = (did: string, rkey: string) => `at://${did}/app.bsky.feed.post/${rkey}`
const URI = postAt(ALICE, '3kpost000001')
const ref = (uri = URI, cid = CID) => refAt(uri, cid, INDEXED)

/** A post record as it reaches the plugin: decoded from JSON into the data model, then checked. */
const record = (extra: object = {}) =>
  post.parse(
    lexParse(
      JSON.stringify({ $type: 'app.bsky.feed.post', text: 'hello', createdAt: CREATED, ...extra }),
    ),
  )
type Post = ReturnType<typeof record>

const blob = (cid: string, mimeType = 'image/jpeg') => ({
  $type: 'blob',
  ref: { $link: cid },
  mimeType,
  size: 1000,
})
const strong = (uri: string, cid = CID) => ({ uri, cid })
const replyTo = (parent: string, root = parent) => ({
  reply: { root: strong(root), parent: strong(parent) },
})
const quoting = (uri: string) => ({
  embed: { $type: 'app.bsky.embed.record', record: strong(uri) },
})
const mentioning = (...dids: string[]) => ({
  facets: dids.map((did) => ({
    index: { byteStart: 0, byteEnd: 5 },
    features: [{ $type: 'app.bsky.richtext.facet#mention', did }],
  })),
})

/** The row as the writer stores it: the columns the stock leaves null, and the generated sortAt. */
function stored(db: MemoryReader, uri: string, rec: Post, cid = CID): PostRow {
  const row = post.toRow(db, ref(uri, cid), rec)!
  return {
    invalidReplyRoot: null,
    violatesThreadGate: null,
    violatesEmbeddingRules: null,
    hasThreadGate: null,
    hasPostGate: null,
    ...row,
    sortAt: row.createdAt < INDEXED ? row.createdAt : INDEXED,
  } as PostRow
}

/** Indexes a post as the writer does before onInsert runs: its record row, then its post row. */
function index(db: MemoryReader, uri: string, rec: Post, cid = CID): PostRow {
  db.put('record', {
    uri,
    cid,
    did: new AtUri(uri).host,
    json: JSON.stringify(rec),
    indexedAt: INDEXED,
  })
  const row = stored(db, uri, rec, cid)
  db.put('post', row)
  return row
}

/** Creates a post and returns what its insert declares. */
function create(db: MemoryReader, uri: string, rec: Post, cid = CID) {
  const row = index(db, uri, rec, cid)
  return post.onInsert(db, row, ref(uri, cid), rec)
}

/** A gate record (threadgate / postgate) beside its post, as the `record` table holds it. */
function putGate(db: MemoryReader, postUri: string, gate: 'threadgate' | 'postgate', body: object) {
  const uri = postUri.replace('/app.bsky.feed.post/', `/app.bsky.feed.${gate}/`)
  const json = JSON.stringify({
    $type: `app.bsky.feed.${gate}`,
    post: postUri,
    createdAt: CREATED,
    ...body,
  })
  db.put('record', { uri, cid: CID, did: new AtUri(uri).host, json, indexedAt: INDEXED })
}

/**
 * Counters as the counts they end up changing. The stock recounts each aggregate outright, so
 * what matters is the net change per row; a zero is kept because it still creates the row.
 */
function net(counters: Counter[] = []): Record<string, number> {
  const out: Record<string, number> = {}
  for (const c of counters) {
    const key = `${c.table} ${c.key} ${c.column}`
    out[key] = (out[key] ?? 0) + c.delta
  }
  return out
}

/** A notification of `uri` (written by `author`) to `did`. */
const notif = (
  did: string,
  reason: string,
  reasonSubject: string | undefined,
  author: string,
  uri: string,
  cid = CID,
) => ({
  did,
  reason,
  ...(reasonSubject ? { reasonSubject } : {}),
  author,
  recordUri: uri,
  recordCid: cid,
  sortAt: CREATED,
})

const feedItem = (uri: string, originatorDid: string, cid = CID) => ({
  kind: 'insert',
  table: 'feed_item',
  values: { type: 'post', uri, cid, postUri: uri, originatorDid, sortAt: CREATED },
})

// Delete of every embed row of a post, the same for any post.
const EMBED_DELETES = [
  'post_embed_image',
  'post_embed_external',
  'post_embed_record',
  'post_embed_video',
  'post_embed_gallery_image',
].map((table) => ({ kind: 'delete', table, where: { postUri: URI } }))

// A thread by Bob, used by the reply tests.
const ROOT = postAt(BOB, '3kroot000001')

/** A reader that notes every read, as `table {where}` with the columns in order. */
class Recording extends MemoryReader {
  readonly reads = new Set<string>()
  override rows<T extends TableName>(table: T, where: Record<string, WhereValue>) {
    this.reads.add(readKey(table, where))
    return super.rows(table, where)
  }
}
const readKey = (table: string, where: object) =>
  `${table} ${JSON.stringify(Object.fromEntries(Object.entries(where).sort()))}`

afterEach(() => {
  vi.useRealTimers()
})

describe('app.bsky.feed.post: parse', () => {
  it('accepts a valid post', () => {
    expect(record().text).toBe('hello')
  })

  it('refuses a record that is not a valid post', () => {
    const bad: object[] = [
      { $type: 'app.bsky.feed.post', createdAt: CREATED },
      { $type: 'app.bsky.feed.post', text: 'hi' },
      { $type: 'app.bsky.feed.post', text: 'hi', createdAt: 'yesterday' },
      { $type: 'app.bsky.feed.like', text: 'hi', createdAt: CREATED },
      // 301 graphemes: over the limit of 300.
      { $type: 'app.bsky.feed.post', text: 'x'.repeat(301), createdAt: CREATED },
      {
        $type: 'app.bsky.feed.post',
        text: 'hi',
        createdAt: CREATED,
        langs: ['en', 'fr', 'de', 'it'],
      },
      { $type: 'app.bsky.feed.post', text: 'hi', createdAt: CREATED, langs: ['not a language'] },
      {
        $type: 'app.bsky.feed.post',
        text: 'hi',
        createdAt: CREATED,
        reply: { parent: strong(ROOT) },
      },
      {
        $type: 'app.bsky.feed.post',
        text: 'hi',
        createdAt: CREATED,
        reply: { root: strong(ROOT), parent: strong('https://example.com/post') },
      },
      {
        $type: 'app.bsky.feed.post',
        text: 'hi',
        createdAt: CREATED,
        embed: { $type: 'app.bsky.embed.record', record: { uri: ROOT, cid: 'not-a-cid' } },
      },
      {
        $type: 'app.bsky.feed.post',
        text: 'hi',
        createdAt: CREATED,
        embed: {
          $type: 'app.bsky.embed.images',
          images: [1, 2, 3, 4, 5].map(() => ({ image: blob(IMG1), alt: '' })),
        },
      },
    ]
    for (const rec of bad) {
      expect(() => post.parse(lexParse(JSON.stringify(rec))), JSON.stringify(rec)).toThrow()
    }
  })
})

describe('app.bsky.feed.post: what the stock drops outright', () => {
  it('keeps any valid post on the record alone: the stock judges posts only against the index', () => {
    const odd = [
      record({
        text: '',
        embed: {
          $type: 'app.bsky.embed.external',
          external: { uri: 'https://a.example', title: '', description: '' },
        },
      }),
      record(replyTo(`at://bob.example.com/app.bsky.feed.post/3kparent`, ROOT)),
      record(quoting(URI)),
      record(quoting(`at://bob.example.com/app.bsky.feed.post/3kquoted`)),
    ]
    for (const rec of odd) {
      expect(() => post.check?.(ref(), rec)).not.toThrow()
      // Nor does indexing one fail: only a reply's root must be at a DID.
      expect(() => create(new MemoryReader(), URI, rec)).not.toThrow()
    }
  })

  it('drops a reply whose root is not at a DID: the stock fails resolving the thread owner', () => {
    const rec = record(replyTo(ROOT, 'at://bob.example.com/app.bsky.feed.post/3kroot'))
    expect(() => post.toRow(new MemoryReader(), ref(), rec)).toThrow()
  })
})

describe('app.bsky.feed.post: toRow', () => {
  it('makes the row of a plain post, createdAt normalised and langs / tags as JSON lists', () => {
    const rec = record({
      text: 'olá mundo',
      createdAt: '2026-03-01T12:00:00+01:00',
      langs: ['pt-BR', 'en'],
      tags: ['openplane', 'atproto'],
    })
    expect(post.toRow(new MemoryReader(), ref(), rec)).toEqual({
      uri: URI,
      cid: CID,
      creator: ALICE,
      text: 'olá mundo',
      createdAt: '2026-03-01T11:00:00.000Z',
      replyRoot: null,
      replyRootCid: null,
      replyParent: null,
      replyParentCid: null,
      langs: '["pt-BR","en"]',
      tags: '["openplane","atproto"]',
      indexedAt: INDEXED,
    })
  })

  it('writes empty langs and tags as null, as the stock does', () => {
    const row = post.toRow(new MemoryReader(), ref(), record({ langs: [], tags: [] }))!
    expect([row.langs, row.tags]).toEqual([null, null])
  })

  it('makes the row of a valid reply with no verdicts set', () => {
    const db = new MemoryReader()
    index(db, ROOT, record())
    const rec = record({ reply: { root: strong(ROOT, CID2), parent: strong(ROOT, CID2) } })
    expect(post.toRow(db, ref(), rec)).toEqual({
      uri: URI,
      cid: CID,
      creator: ALICE,
      text: 'hello',
      createdAt: CREATED,
      replyRoot: ROOT,
      replyRootCid: CID2,
      replyParent: ROOT,
      replyParentCid: CID2,
      langs: null,
      tags: null,
      indexedAt: INDEXED,
    })
  })

  it('accepts a reply to a reply of the same thread', () => {
    const db = new MemoryReader()
    const mid = postAt(CAROL, '3kmid')
    index(db, ROOT, record())
    index(db, mid, record(replyTo(ROOT)))
    const row = post.toRow(db, ref(), record(replyTo(mid, ROOT)))!
    expect([row.invalidReplyRoot, row.violatesThreadGate]).toEqual([undefined, undefined])
  })

  it('marks a reply whose root is not its parent’s root as invalid (both verdicts written)', () => {
    const db = new MemoryReader()
    const other = postAt(CAROL, '3kotherroot')
    const mid = postAt(CAROL, '3kmid')
    index(db, ROOT, record())
    index(db, other, record())
    index(db, mid, record(replyTo(ROOT)))
    const row = post.toRow(db, ref(), record(replyTo(mid, other)))!
    expect([row.invalidReplyRoot, row.violatesThreadGate]).toEqual([true, false])
  })

  it('marks a reply naming a reply as its root invalid', () => {
    const db = new MemoryReader()
    const mid = postAt(CAROL, '3kmid')
    index(db, ROOT, record())
    index(db, mid, record(replyTo(ROOT)))
    const row = post.toRow(db, ref(), record(replyTo(mid, mid)))!
    expect([row.invalidReplyRoot, row.violatesThreadGate]).toEqual([true, false])
  })

  it('marks a reply under an invalid reply invalid too', () => {
    const db = new MemoryReader()
    const mid = postAt(CAROL, '3kmid')
    index(db, ROOT, record())
    // Carol's reply names itself root of a missing parent: invalid.
    index(db, mid, record(replyTo(postAt(CAROL, '3kgone'), ROOT)))
    expect(db.first('post', { uri: mid })?.invalidReplyRoot).toBe(true)
    // Otherwise consistent: same root as its parent.
    const row = post.toRow(db, ref(), record(replyTo(mid, ROOT)))!
    expect([row.invalidReplyRoot, row.violatesThreadGate]).toEqual([true, false])
  })

  it('marks a reply to a parent never indexed invalid, keeping its reply columns', () => {
    const row = post.toRow(new MemoryReader(), ref(), record(replyTo(ROOT)))!
    expect(row).toMatchObject({
      replyRoot: ROOT,
      replyParent: ROOT,
      invalidReplyRoot: true,
      violatesThreadGate: false,
    })
  })

  it('marks a quote forbidden by the quoted post’s postgate', () => {
    const db = new MemoryReader()
    const quoted = postAt(BOB, '3kquoted')
    putGate(db, quoted, 'postgate', {
      embeddingRules: [{ $type: 'app.bsky.feed.postgate#disableRule' }],
    })
    expect(post.toRow(db, ref(), record(quoting(quoted)))?.violatesEmbeddingRules).toBe(true)
    // Its author may still quote it.
    const own = postAt(BOB, '3kown')
    expect(
      post.toRow(db, ref(own), record(quoting(quoted)))?.violatesEmbeddingRules,
    ).toBeUndefined()
  })

  it('lets a quote through a postgate that only detaches quotes or has no rules', () => {
    const db = new MemoryReader()
    const detaching = postAt(BOB, '3kdetaching')
    const empty = postAt(BOB, '3kempty')
    putGate(db, detaching, 'postgate', { detachedEmbeddingUris: [URI] })
    putGate(db, empty, 'postgate', { embeddingRules: [] })
    for (const quoted of [detaching, empty]) {
      const row = post.toRow(db, ref(), record(quoting(quoted)))!
      expect(row.violatesEmbeddingRules, quoted).toBeUndefined()
    }
  })

  it('applies no postgate to an embedded record that is not a post', () => {
    const db = new MemoryReader()
    const list = `at://${BOB}/app.bsky.graph.list/3klist`
    db.put('record', {
      uri: list,
      json: JSON.stringify({ embeddingRules: [{ $type: 'app.bsky.feed.postgate#disableRule' }] }),
    })
    expect(post.toRow(db, ref(), record(quoting(list)))?.violatesEmbeddingRules).toBeUndefined()
  })
})

describe('app.bsky.feed.post: thread gates', () => {
  const verdict = (db: MemoryReader, author = ALICE, rec = record(replyTo(ROOT))) => {
    const row = post.toRow(db, ref(postAt(author, '3kreply')), rec)!
    return [row.invalidReplyRoot, row.violatesThreadGate]
  }
  const gated = (allow?: object[], rootExtra: object = {}) => {
    const db = new MemoryReader()
    index(db, ROOT, record(rootExtra))
    putGate(db, ROOT, 'threadgate', allow ? { allow } : {})
    return db
  }
  const rule = (name: string, extra: object = {}) => ({
    $type: `app.bsky.feed.threadgate#${name}`,
    ...extra,
  })
  const LIST = `at://${BOB}/app.bsky.graph.list/3kfriends`

  it('lets anyone reply under a gate without `allow`, and nobody under an empty one', () => {
    expect(verdict(gated())).toEqual([undefined, undefined])
    expect(verdict(gated([]))).toEqual([false, true])
  })

  it('always lets the thread owner reply', () => {
    expect(verdict(gated([]), BOB)).toEqual([undefined, undefined])
  })

  it('lets a replier the root mentions through a mention rule, and nobody else', () => {
    expect(verdict(gated([rule('mentionRule')], mentioning(ALICE)))).toEqual([undefined, undefined])
    expect(verdict(gated([rule('mentionRule')], mentioning(CAROL)))).toEqual([false, true])
  })

  it('lets a follower of the owner through a follower rule', () => {
    const db = gated([rule('followerRule')])
    expect(verdict(db)).toEqual([false, true])
    // The owner following the replier is not enough.
    db.put('follow', { creator: BOB, subjectDid: ALICE })
    expect(verdict(db)).toEqual([false, true])
    db.put('follow', { creator: ALICE, subjectDid: BOB })
    expect(verdict(db)).toEqual([undefined, undefined])
  })

  it('lets someone the owner follows through a following rule', () => {
    const db = gated([rule('followingRule')])
    db.put('follow', { creator: ALICE, subjectDid: BOB })
    expect(verdict(db)).toEqual([false, true])
    db.put('follow', { creator: BOB, subjectDid: ALICE })
    expect(verdict(db)).toEqual([undefined, undefined])
  })

  it('lets a member of an allowed list through a list rule', () => {
    const db = gated([rule('listRule', { list: LIST })])
    db.put('list_item', { listUri: `at://${BOB}/app.bsky.graph.list/3kother`, subjectDid: ALICE })
    expect(verdict(db)).toEqual([false, true])
    db.put('list_item', { listUri: LIST, subjectDid: ALICE })
    expect(verdict(db)).toEqual([undefined, undefined])
  })

  it('judges by the root’s gate only, not the parent’s', () => {
    const db = new MemoryReader()
    const mid = postAt(CAROL, '3kmid')
    index(db, ROOT, record())
    index(db, mid, record(replyTo(ROOT)))
    putGate(db, mid, 'threadgate', { allow: [] })
    expect(verdict(db, ALICE, record(replyTo(mid, ROOT)))).toEqual([undefined, undefined])
  })

  it('gives a gate violator no reply count and no reply notification, but keeps its mentions', () => {
    const db = gated([])
    const rec = record({ ...replyTo(ROOT), ...mentioning(BOB, CAROL) })
    const effects = create(db, URI, rec)
    expect(net(effects.counters)).toEqual({
      [`profile_agg ${ALICE} postsCount`]: 1,
      [`post_agg ${ROOT} replyCount`]: 0,
    })
    expect(effects.notifications).toEqual([
      notif(BOB, 'mention', undefined, ALICE, URI),
      notif(CAROL, 'mention', undefined, ALICE, URI),
    ])
  })
})

describe('app.bsky.feed.post: embeds', () => {
  const embedRows = (embed: object, uri = URI) => {
    const db = new MemoryReader()
    const effects = create(db, uri, record({ embed }))
    return effects.rows!.filter((r) => r.table !== 'feed_item')
  }
  const insert = (table: string, values: object) => ({ kind: 'insert', table, values })

  it('writes one image row per image, by position', () => {
    const rows = embedRows({
      $type: 'app.bsky.embed.images',
      images: [
        { image: blob(IMG1), alt: 'a cat' },
        { image: blob(IMG2, 'image/png'), alt: '', aspectRatio: { width: 4, height: 3 } },
      ],
    })
    expect(rows).toEqual([
      insert('post_embed_image', { postUri: URI, position: 0, imageCid: IMG1, alt: 'a cat' }),
      insert('post_embed_image', { postUri: URI, position: 1, imageCid: IMG2, alt: '' }),
    ])
  })

  it('writes an external link, with its thumbnail or null', () => {
    const external = { uri: 'https://example.com/a', title: 'A', description: 'About A' }
    expect(
      embedRows({ $type: 'app.bsky.embed.external', external: { ...external, thumb: blob(IMG1) } }),
    ).toEqual([
      insert('post_embed_external', {
        postUri: URI,
        uri: 'https://example.com/a',
        title: 'A',
        description: 'About A',
        thumbCid: IMG1,
      }),
    ])
    expect(embedRows({ $type: 'app.bsky.embed.external', external })).toEqual([
      insert('post_embed_external', {
        postUri: URI,
        uri: 'https://example.com/a',
        title: 'A',
        description: 'About A',
        thumbCid: null,
      }),
    ])
  })

  it('writes a quoted post as an embedded record and a quote row', () => {
    const quoted = postAt(BOB, '3kquoted')
    expect(embedRows({ $type: 'app.bsky.embed.record', record: strong(quoted, CID2) })).toEqual([
      insert('post_embed_record', { postUri: URI, embedUri: quoted, embedCid: CID2 }),
      insert('quote', {
        uri: URI,
        cid: CID,
        subject: quoted,
        subjectCid: CID2,
        createdAt: CREATED,
        indexedAt: INDEXED,
      }),
    ])
  })

  it('writes another embedded record (a feed, a list) without a quote row', () => {
    const feed = `at://${BOB}/app.bsky.feed.generator/3kfeed`
    expect(embedRows({ $type: 'app.bsky.embed.record', record: strong(feed) })).toEqual([
      insert('post_embed_record', { postUri: URI, embedUri: feed, embedCid: CID }),
    ])
  })

  it('splits a record with media into its record (and quote) and its media', () => {
    const quoted = postAt(BOB, '3kquoted')
    const rows = embedRows({
      $type: 'app.bsky.embed.recordWithMedia',
      record: { record: strong(quoted, CID2) },
      media: { $type: 'app.bsky.embed.images', images: [{ image: blob(IMG1), alt: 'x' }] },
    })
    expect(rows).toEqual([
      insert('post_embed_record', { postUri: URI, embedUri: quoted, embedCid: CID2 }),
      insert('post_embed_image', { postUri: URI, position: 0, imageCid: IMG1, alt: 'x' }),
      insert('quote', {
        uri: URI,
        cid: CID,
        subject: quoted,
        subjectCid: CID2,
        createdAt: CREATED,
        indexedAt: INDEXED,
      }),
    ])
  })

  it('writes a video, its alt text or null', () => {
    const video = blob(IMG2, 'video/mp4')
    expect(embedRows({ $type: 'app.bsky.embed.video', video, alt: 'a clip' })).toEqual([
      insert('post_embed_video', { postUri: URI, videoCid: IMG2, alt: 'a clip' }),
    ])
    expect(embedRows({ $type: 'app.bsky.embed.video', video })).toEqual([
      insert('post_embed_video', { postUri: URI, videoCid: IMG2, alt: null }),
    ])
  })

  it('writes gallery images by position, skipping items of unknown kinds but not their place', () => {
    const image = (cid: string, alt: string) => ({
      $type: 'app.bsky.embed.gallery#image',
      image: blob(cid),
      alt,
      aspectRatio: { width: 1, height: 1 },
    })
    const rows = embedRows({
      $type: 'app.bsky.embed.gallery',
      items: [
        image(IMG1, 'one'),
        { $type: 'app.example.gallery#sound', x: 1 },
        image(IMG2, 'three'),
      ],
    })
    expect(rows).toEqual([
      insert('post_embed_gallery_image', { postUri: URI, position: 0, imageCid: IMG1, alt: 'one' }),
      insert('post_embed_gallery_image', {
        postUri: URI,
        position: 2,
        imageCid: IMG2,
        alt: 'three',
      }),
    ])
  })

  it('writes nothing for an embed of an unknown type', () => {
    expect(embedRows({ $type: 'app.example.embed', anything: true })).toEqual([])
  })
})

describe('app.bsky.feed.post: onInsert', () => {
  it('gives a plain post its feed item and a post on its author’s count, notifying nobody', () => {
    const effects = create(new MemoryReader(), URI, record())
    expect(effects.rows).toEqual([feedItem(URI, ALICE)])
    expect(net(effects.counters)).toEqual({ [`profile_agg ${ALICE} postsCount`]: 1 })
    expect(effects.notifications).toEqual([])
  })

  it('sorts the feed item of a post dated after it was indexed at its index time', () => {
    const effects = create(
      new MemoryReader(),
      URI,
      record({ createdAt: '2030-01-01T00:00:00.000Z' }),
    )
    expect(effects.rows).toEqual([
      { ...feedItem(URI, ALICE), values: { ...feedItem(URI, ALICE).values, sortAt: INDEXED } },
    ])
  })

  it('counts a reply on its parent and notifies the parent’s author', () => {
    const db = new MemoryReader()
    index(db, ROOT, record())
    const effects = create(db, URI, record(replyTo(ROOT)))
    expect(effects.rows).toEqual([feedItem(URI, ALICE)])
    expect(net(effects.counters)).toEqual({
      [`profile_agg ${ALICE} postsCount`]: 1,
      [`post_agg ${ROOT} replyCount`]: 1,
    })
    expect(effects.notifications).toEqual([notif(BOB, 'reply', ROOT, ALICE, URI)])
  })

  it('counts a reply to a parent never indexed on that parent, notifying nobody', () => {
    const parent = postAt(CAROL, '3kgone')
    const effects = create(new MemoryReader(), URI, record(replyTo(parent, ROOT)))
    expect(net(effects.counters)).toEqual({
      [`profile_agg ${ALICE} postsCount`]: 1,
      [`post_agg ${parent} replyCount`]: 1,
    })
    expect(effects.notifications).toEqual([])
  })

  it('counts and notifies an invalid reply like any other: only the gate withholds them', () => {
    const db = new MemoryReader()
    const other = postAt(DAN, '3kotherroot')
    const carols = postAt(CAROL, '3kcarol')
    index(db, ROOT, record())
    index(db, other, record())
    index(db, carols, record(replyTo(ROOT)))
    // Carol's reply belongs to Bob's thread, not Dan's.
    const row = index(db, URI, record(replyTo(carols, other)))
    expect(row.invalidReplyRoot).toBe(true)
    const effects = post.onInsert(db, row, ref(), record(replyTo(carols, other)))
    expect(net(effects.counters)).toEqual({
      [`profile_agg ${ALICE} postsCount`]: 1,
      [`post_agg ${carols} replyCount`]: 1,
    })
    expect(effects.notifications).toEqual([
      notif(CAROL, 'reply', carols, ALICE, URI),
      notif(BOB, 'reply', ROOT, ALICE, URI),
    ])
  })

  it('records a reply by the thread’s owner as an OP reply, wherever it sits and valid or not', () => {
    const db = new MemoryReader()
    const carols = postAt(CAROL, '3kcarol')
    index(db, ROOT, record())
    index(db, carols, record(replyTo(ROOT)))
    const bobs = postAt(BOB, '3kbobreply')
    const effects = create(db, bobs, record(replyTo(carols, ROOT)))
    expect(effects.rows).toEqual([
      feedItem(bobs, BOB),
      {
        kind: 'insert',
        table: 'op_thread_reply',
        values: { rootUri: ROOT, parentUri: carols, uri: bobs, deletedAt: null },
      },
    ])
    expect(effects.notifications).toEqual([notif(CAROL, 'reply', carols, BOB, bobs)])
    // An invalid reply (its parent was never indexed) still counts as one.
    const gone = postAt(CAROL, '3kgone')
    const lost = postAt(BOB, '3klost')
    expect(create(db, lost, record(replyTo(gone, ROOT))).rows).toContainEqual({
      kind: 'insert',
      table: 'op_thread_reply',
      values: { rootUri: ROOT, parentUri: gone, uri: lost, deletedAt: null },
    })
  })

  it('records no OP reply for anyone else’s reply', () => {
    const db = new MemoryReader()
    index(db, ROOT, record())
    expect(create(db, URI, record(replyTo(ROOT))).rows?.map((r) => r.table)).toEqual(['feed_item'])
  })

  it('notifies the authors up to four levels above a reply, nearest first', () => {
    const db = new MemoryReader()
    // Bob's root, then replies by Carol, Dan, Erin, Frank and Grace, each under the one before.
    const chain = [BOB, CAROL, DAN, ERIN, FRANK, GRACE].map((did, i) => postAt(did, `3klevel${i}`))
    index(db, chain[0]!, record())
    for (let i = 1; i < chain.length; i++)
      index(db, chain[i]!, record(replyTo(chain[i - 1]!, chain[0])))
    const effects = create(db, URI, record(replyTo(chain[5]!, chain[0])))
    expect(effects.notifications).toEqual([
      notif(GRACE, 'reply', chain[5], ALICE, URI),
      notif(FRANK, 'reply', chain[4], ALICE, URI),
      notif(ERIN, 'reply', chain[3], ALICE, URI),
      notif(DAN, 'reply', chain[2], ALICE, URI),
    ])
  })

  it('notifies each person once, mentions first, and never the author', () => {
    const db = new MemoryReader()
    const mine = postAt(ALICE, '3kmine')
    const carols = postAt(CAROL, '3kcarol')
    const bobs = postAt(BOB, '3kbob2')
    index(db, ROOT, record())
    index(db, mine, record(replyTo(ROOT)))
    index(db, carols, record(replyTo(mine, ROOT)))
    index(db, bobs, record(replyTo(carols, ROOT)))
    // Up the thread: Bob, Carol, Alice herself, Bob again.
    const effects = create(db, URI, record({ ...replyTo(bobs, ROOT), ...mentioning(ALICE, CAROL) }))
    expect(effects.notifications).toEqual([
      notif(CAROL, 'mention', undefined, ALICE, URI),
      notif(BOB, 'reply', bobs, ALICE, URI),
    ])
  })

  it('notifies mentions only, not links or tags', () => {
    const rec = record({
      facets: [
        {
          index: { byteStart: 0, byteEnd: 5 },
          features: [
            { $type: 'app.bsky.richtext.facet#link', uri: 'https://example.com' },
            { $type: 'app.bsky.richtext.facet#tag', tag: 'cats' },
            { $type: 'app.bsky.richtext.facet#mention', did: DAN },
          ],
        },
      ],
    })
    expect(create(new MemoryReader(), URI, rec).notifications).toEqual([
      notif(DAN, 'mention', undefined, ALICE, URI),
    ])
  })

  it('notifies nobody of a reply to your own post', () => {
    const db = new MemoryReader()
    const mine = postAt(ALICE, '3kmine')
    index(db, mine, record())
    expect(create(db, URI, record(replyTo(mine))).notifications).toEqual([])
  })

  it('stops reply notifications at a reply the root’s owner hid, and notifies the thread above on behalf of replies indexed before this post', () => {
    const db = new MemoryReader()
    const a = postAt(CAROL, '3ka')
    const b = postAt(DAN, '3kb')
    const hidden = postAt(ERIN, '3khidden')
    const early = postAt(FRANK, '3kearly')
    putGate(db, ROOT, 'threadgate', { hiddenReplies: [hidden] })
    index(db, ROOT, record())
    index(db, a, record(replyTo(ROOT)))
    index(db, b, record(replyTo(a, ROOT)))
    index(db, hidden, record(replyTo(b, ROOT)))
    // Frank's reply to this post came first (out of order), with a cid of its own.
    index(db, early, record({ ...replyTo(URI, ROOT), createdAt: EARLIER }), CID2)
    const effects = create(db, URI, record(replyTo(hidden, ROOT)))
    // This post notifies the hidden reply's author and nobody above. Frank's reply, one level
    // below, notifies up to four levels above itself: Dan and Carol, not Bob.
    expect(effects.notifications).toEqual([
      notif(ERIN, 'reply', hidden, ALICE, URI),
      { ...notif(DAN, 'reply', b, FRANK, early, CID2), sortAt: EARLIER },
      { ...notif(CAROL, 'reply', a, FRANK, early, CID2), sortAt: EARLIER },
    ])
  })

  it('counts a quote on the quoted post and notifies its author', () => {
    const quoted = postAt(BOB, '3kquoted')
    const effects = create(new MemoryReader(), URI, record(quoting(quoted)))
    expect(net(effects.counters)).toEqual({
      [`profile_agg ${ALICE} postsCount`]: 1,
      [`post_agg ${quoted} quoteCount`]: 1,
    })
    expect(effects.notifications).toEqual([notif(BOB, 'quote', quoted, ALICE, URI)])
  })

  it('notifies of a quote inside a record with media', () => {
    const quoted = postAt(BOB, '3kquoted')
    const effects = create(
      new MemoryReader(),
      URI,
      record({
        embed: {
          $type: 'app.bsky.embed.recordWithMedia',
          record: { record: strong(quoted) },
          media: { $type: 'app.bsky.embed.images', images: [{ image: blob(IMG1), alt: '' }] },
        },
      }),
    )
    expect(effects.notifications).toEqual([notif(BOB, 'quote', quoted, ALICE, URI)])
  })

  it('notifies nobody of a quote of your own post, and someone both mentioned and quoted once', () => {
    const own = postAt(ALICE, '3kown')
    expect(create(new MemoryReader(), URI, record(quoting(own))).notifications).toEqual([])
    const quoted = postAt(BOB, '3kquoted')
    const both = create(new MemoryReader(), URI, record({ ...quoting(quoted), ...mentioning(BOB) }))
    expect(both.notifications).toEqual([notif(BOB, 'mention', undefined, ALICE, URI)])
  })

  it('does not notify of a quote its postgate forbids, though the quote is kept and counted', () => {
    const db = new MemoryReader()
    const quoted = postAt(BOB, '3kquoted')
    putGate(db, quoted, 'postgate', {
      embeddingRules: [{ $type: 'app.bsky.feed.postgate#disableRule' }],
    })
    const effects = create(db, URI, record(quoting(quoted)))
    expect(effects.notifications).toEqual([])
    expect(effects.rows?.map((r) => r.table)).toEqual(['feed_item', 'post_embed_record', 'quote'])
    expect(net(effects.counters)).toEqual({
      [`profile_agg ${ALICE} postsCount`]: 1,
      [`post_agg ${quoted} quoteCount`]: 1,
    })
  })

  it('neither counts nor notifies an embedded record that is not a post', () => {
    const list = `at://${BOB}/app.bsky.graph.list/3klist`
    const effects = create(new MemoryReader(), URI, record(quoting(list)))
    expect(net(effects.counters)).toEqual({ [`profile_agg ${ALICE} postsCount`]: 1 })
    expect(effects.notifications).toEqual([])
  })

  it('does not count a quote again when a quote row at its uri outlived the post', () => {
    const db = new MemoryReader()
    const quoted = postAt(BOB, '3kquoted')
    // The stock's insert of the quote row does nothing then, and its recount finds the same rows.
    db.put('quote', { uri: URI, cid: CID, subject: quoted, subjectCid: CID })
    const effects = create(db, URI, record(quoting(quoted)))
    expect(net(effects.counters)).toEqual({
      [`profile_agg ${ALICE} postsCount`]: 1,
      [`post_agg ${quoted} quoteCount`]: 0,
    })
  })
})

describe('app.bsky.feed.post: onDelete', () => {
  it('takes back a plain post: its embeds, its count and its notifications', () => {
    const row = stored(new MemoryReader(), URI, record())
    const effects = post.onDelete(new MemoryReader(), row, null)
    expect(effects.rows).toEqual(EMBED_DELETES)
    expect(net(effects.counters)).toEqual({ [`profile_agg ${ALICE} postsCount`]: -1 })
    expect(effects.notifications).toEqual([])
    expect(effects.deleteNotificationsFor).toEqual([URI])
  })

  it('takes a reply off its parent’s count', () => {
    const db = new MemoryReader()
    index(db, ROOT, record())
    const row = stored(db, URI, record(replyTo(ROOT)))
    expect(net(post.onDelete(db, row, null).counters)).toEqual({
      [`profile_agg ${ALICE} postsCount`]: -1,
      [`post_agg ${ROOT} replyCount`]: -1,
    })
  })

  it('leaves the parent’s count of a gate violator as it was', () => {
    const db = new MemoryReader()
    index(db, ROOT, record())
    putGate(db, ROOT, 'threadgate', { allow: [] })
    const row = stored(db, URI, record(replyTo(ROOT)))
    expect(row.violatesThreadGate).toBe(true)
    expect(net(post.onDelete(db, row, null).counters)).toEqual({
      [`profile_agg ${ALICE} postsCount`]: -1,
      [`post_agg ${ROOT} replyCount`]: 0,
    })
  })

  it('takes a quote back: its quote row and its count on the quoted post', () => {
    const db = new MemoryReader()
    const quoted = postAt(BOB, '3kquoted')
    const row = stored(db, URI, record(quoting(quoted)))
    // The embed and quote rows are still there when onDelete reads them.
    db.put('post_embed_record', { postUri: URI, embedUri: quoted, embedCid: CID })
    db.put('quote', { uri: URI, cid: CID, subject: quoted, subjectCid: CID })
    const effects = post.onDelete(db, row, null)
    expect(effects.rows).toEqual([
      ...EMBED_DELETES,
      { kind: 'delete', table: 'quote', where: { uri: URI } },
    ])
    expect(net(effects.counters)).toEqual({
      [`profile_agg ${ALICE} postsCount`]: -1,
      [`post_agg ${quoted} quoteCount`]: -1,
    })
  })

  it('touches no quote of an embedded record that is not a post', () => {
    const db = new MemoryReader()
    const list = `at://${BOB}/app.bsky.graph.list/3klist`
    const row = stored(db, URI, record(quoting(list)))
    db.put('post_embed_record', { postUri: URI, embedUri: list, embedCid: CID })
    const effects = post.onDelete(db, row, null)
    expect(effects.rows).toEqual(EMBED_DELETES)
    expect(net(effects.counters)).toEqual({ [`profile_agg ${ALICE} postsCount`]: -1 })
  })

  it('notifies anew from the new version of an edited post, its old notifications removed', () => {
    const db = new MemoryReader()
    index(db, ROOT, record())
    const old = stored(db, URI, record(replyTo(ROOT)))
    // The writer has put the new version in place when it asks onDelete.
    const edited = record({ ...replyTo(ROOT), ...mentioning(CAROL) })
    const replacement = index(db, URI, edited, CID2)
    const effects = post.onDelete(db, old, replacement, edited)
    expect(effects.notifications).toEqual([
      notif(CAROL, 'mention', undefined, ALICE, URI, CID2),
      notif(BOB, 'reply', ROOT, ALICE, URI, CID2),
    ])
    expect(effects.deleteNotificationsFor).toEqual([URI])
  })

  it('names every read its delete makes, before the post is known', () => {
    const named = post.readsOnDelete!(URI).map((r) => readKey(r.table, r.where))
    expect(named).toEqual([
      ...EMBED_DELETES.map((r) => readKey(r.table, r.where)),
      readKey('quote', { uri: URI }),
    ])
    const db = new Recording()
    const quoted = postAt(BOB, '3kquoted')
    const row = stored(db, URI, record(quoting(quoted)))
    db.put('post_embed_record', { postUri: URI, embedUri: quoted, embedCid: CID })
    db.put('quote', { uri: URI, cid: CID, subject: quoted, subjectCid: CID })
    db.reads.clear()
    post.onDelete(db, row, null)
    expect([...db.reads].filter((r) => !named.includes(r))).toEqual([])
    expect(db.reads.size).toBeGreaterThan(0)
  })
})

describe('app.bsky.feed.post: unconditional', () => {
  it('writes nothing beyond the post’s own row on create', () => {
    expect(post.unconditional!.create(ref(), record(quoting(postAt(BOB, '3kq'))))).toEqual([])
  })

  it('on any delete, takes its feed items, marks it deleted as an OP reply and removes the quotes of it', () => {
    vi.useFakeTimers({ toFake: ['Date'] })
    vi.setSystemTime(new Date('2026-03-02T08:30:00.000Z'))
    const effects = post.unconditional!.delete(new MemoryReader(), URI)
    expect(effects.rows).toEqual([
      { kind: 'delete', table: 'feed_item', where: { postUri: URI } },
      {
        kind: 'update',
        table: 'op_thread_reply',
        where: { uri: URI },
        set: { deletedAt: '2026-03-02T08:30:00.000Z' },
      },
      { kind: 'delete', table: 'quote', where: { subject: URI } },
    ])
    expect(net(effects.counters)).toEqual({})
  })
})

describe('app.bsky.feed.post: what a create reads', () => {
  it('reads nothing for a plain post', () => {
    expect(post.readsOnCreate!(ref(), record())).toEqual([])
  })

  it('names the thread, its gate and the quoted post’s gate for a reply that quotes', () => {
    const quoted = postAt(CAROL, '3kquoted')
    const parent = postAt(DAN, '3kparent')
    expect(
      post.readsOnCreate!(ref(), record({ ...replyTo(parent, ROOT), ...quoting(quoted) })),
    ).toEqual([
      { table: 'record', where: { uri: parent } },
      { table: 'record', where: { uri: ROOT } },
      { table: 'record', where: { uri: `at://${BOB}/app.bsky.feed.threadgate/3kroot000001` } },
      { table: 'post', where: { uri: parent } },
      { table: 'post', where: { replyParent: URI } },
      { table: 'record', where: { uri: `at://${CAROL}/app.bsky.feed.postgate/3kquoted` } },
      { table: 'quote', where: { uri: URI } },
    ])
  })

  it('names every read a reply that quotes makes, besides its own row', () => {
    const db = new Recording()
    const quoted = postAt(CAROL, '3kquoted')
    index(db, ROOT, record())
    index(db, quoted, record())
    const rec = record({ ...replyTo(ROOT), ...quoting(quoted) })
    db.reads.clear()
    create(db, URI, rec)
    const named = post.readsOnCreate!(ref(), rec).map((r) => readKey(r.table, r.where))
    const unnamed = [...db.reads].filter((r) => !named.includes(r))
    expect(unnamed).toEqual([readKey('post', { uri: URI })])
  })
})

describe('app.bsky.feed.post: what a create inserts', () => {
  // The writer reads these rows' key slots before planning: a key missing here costs a
  // planning pass, a key named here that onInsert never writes costs a read.
  const keys = (rows: { table: string; values: object }[]) =>
    rows.map(({ table, values }) => {
      const v = values as Record<string, unknown>
      return `${table} ${String(v.uri ?? v.postUri)} ${String(v.position ?? v.embedUri ?? '')}`
    })

  it('names the rows onInsert writes beside its own, for a thread reply with images that quotes', () => {
    const db = new MemoryReader()
    const quoted = postAt(CAROL, '3kquoted')
    index(db, ROOT, record())
    index(db, quoted, record())
    const rec = record({
      ...replyTo(ROOT),
      embed: {
        $type: 'app.bsky.embed.recordWithMedia',
        record: { $type: 'app.bsky.embed.record', record: strong(quoted) },
        media: {
          $type: 'app.bsky.embed.images',
          images: [
            { image: blob(IMG1), alt: '' },
            { image: blob(IMG2), alt: '' },
          ],
        },
      },
    })
    // BOB's reply to his own root is an OP reply.
    const uri = postAt(BOB, '3kreply00001')
    const written = create(db, uri, rec).rows!.filter((r) => r.kind === 'insert')
    const named = post.insertsOnCreate!(ref(uri), rec)
    expect(keys(named)).toEqual(keys(written as never))
    expect(named.map((r) => r.table)).toEqual([
      'feed_item',
      'op_thread_reply',
      'post_embed_record',
      'post_embed_image',
      'post_embed_image',
      'quote',
    ])
  })

  it('names only the feed item of a plain post', () => {
    expect(post.insertsOnCreate!(ref(), record()).map((r) => r.table)).toEqual(['feed_item'])
  })
})

describe('post context', () => {
  it('names the parent, the root and its threadgate, and the quoted post’s postgate', () => {
    const quoted = postAt(CAROL, '3kquoted')
    const parent = postAt(DAN, '3kparent')
    expect(
      contextOf('app.bsky.feed.post', record({ ...replyTo(parent, ROOT), ...quoting(quoted) })),
    ).toEqual([
      parent,
      ROOT,
      `at://${BOB}/app.bsky.feed.threadgate/3kroot000001`,
      `at://${CAROL}/app.bsky.feed.postgate/3kquoted`,
    ])
  })

  it('finds the quoted post inside a record with media', () => {
    const quoted = postAt(CAROL, '3kquoted')
    const rec = record({
      embed: {
        $type: 'app.bsky.embed.recordWithMedia',
        record: { record: strong(quoted) },
        media: { $type: 'app.bsky.embed.images', images: [{ image: blob(IMG1), alt: '' }] },
      },
    })
    expect(contextOf('app.bsky.feed.post', rec)).toEqual([
      `at://${CAROL}/app.bsky.feed.postgate/3kquoted`,
    ])
  })

  it('names nothing for a plain post, an embedded record that is not a post, or another collection', () => {
    expect(contextOf('app.bsky.feed.post', record())).toEqual([])
    expect(
      contextOf('app.bsky.feed.post', record(quoting(`at://${BOB}/app.bsky.graph.list/3kl`))),
    ).toEqual([])
    expect(contextOf('app.bsky.feed.like', record(replyTo(ROOT)))).toEqual([])
  })
})
