// The fuzzer's language: a sequence of firehose events over a handful of accounts, written so a
// shrunk failing sequence reads as a script and drops into a regression test unchanged. Records
// are described by their kind and a few parameters; references name other records as
// `<account>/<kind>/<rkey>` (e.g. `B/post/p1`) and accounts by letter. `records()` turns the
// sequence into concrete records, `worlds()` into the identity state the network shows at
// each point.
import { cidForLex } from '@atproto/lex-cbor'
import { jsonToLex } from '@atproto/lex-json'

export const ACCOUNTS = ['A', 'B', 'C', 'D', 'E', 'F'] as const
export type Account = (typeof ACCOUNTS)[number]

export const COLLECTIONS = {
  post: 'app.bsky.feed.post',
  like: 'app.bsky.feed.like',
  repost: 'app.bsky.feed.repost',
  follow: 'app.bsky.graph.follow',
  block: 'app.bsky.graph.block',
  list: 'app.bsky.graph.list',
  listitem: 'app.bsky.graph.listitem',
  listblock: 'app.bsky.graph.listblock',
  optout: 'app.bsky.graph.referencelistoptout',
  threadgate: 'app.bsky.feed.threadgate',
  postgate: 'app.bsky.feed.postgate',
  generator: 'app.bsky.feed.generator',
  starterpack: 'app.bsky.graph.starterpack',
  labeler: 'app.bsky.labeler.service',
  verification: 'app.bsky.graph.verification',
  profile: 'app.bsky.actor.profile',
  chat: 'chat.bsky.actor.declaration',
  germ: 'com.germnetwork.declaration',
  notifdecl: 'app.bsky.notification.declaration',
  status: 'app.bsky.actor.status',
  site: 'site.standard.document',
} as const
export type Kind = keyof typeof COLLECTIONS

/** `<account>/<kind>/<rkey>`: another record of the sequence (it need not exist). */
export type Ref = `${Account}/${Kind}/${string}`

/** What a record says, beyond its kind; each kind reads the fields it knows. */
export interface Params {
  text?: string
  /** Reply: [root, parent]. */
  reply?: [Ref, Ref]
  /** Embedded record (a quote when it is a post). */
  quote?: Ref
  media?: 'images' | 'external' | 'video' | 'gallery'
  /** Media blobs whose ref is a `{ $link }` map in the CBOR (bad input). */
  jsonShapedBlob?: boolean
  mention?: Account
  /** like / repost / listblock / optout: a record; follow / block / listitem / verification: an account. */
  subject?: Ref | Account
  via?: Ref
  /** listitem, starterpack. */
  list?: Ref
  purpose?: 'curate' | 'mod' | 'reference'
  /** threadgate: absent = no rule list (anyone); [] = nobody. */
  allow?: ('mention' | 'follower' | 'following' | 'list')[]
  hidden?: Ref[]
  /** postgate. */
  detached?: Ref[]
  noEmbed?: boolean
  /** profile. */
  pinned?: Ref
  joinedVia?: Ref
  /** Verification: the handle it vouches for. */
  handle?: string
  /** Reference subjects by a CID that is not the subject's current one. */
  staleCid?: boolean
  /** Seconds added to the event time for createdAt (negative: backdated, large: future). */
  skew?: number
  /** Leave createdAt out (profiles may). */
  noCreatedAt?: boolean
}

export type Op =
  | ({ create: Kind; rkey: string } & Params)
  | ({ update: Kind; rkey: string } & Params)
  | { delete: Kind; rkey: string }

export type AccountStatus = 'active' | 'deactivated' | 'takendown' | 'suspended' | 'deleted'

/** `dt`: seconds since the previous event (default 1). */
export type FuzzEvent =
  | { by: Account; ops: Op[]; dt?: number }
  /** Identity event; with `handle` the DID document now claims it (verified unless `verified: false`). */
  | { by: Account; identity: { handle?: string; verified?: false }; dt?: number }
  /** Account event; a `deleted` one is real unless `hosted: true` (the PDS still has the repo). */
  | { by: Account; account: AccountStatus; hosted?: true; dt?: number }
  | { by: Account; sync: true; dt?: number }

export const START_TIME = Date.parse('2025-03-01T12:00:00.000Z')

export const didOf = (a: Account): string => `did:plc:fuzz${a.toLowerCase()}${'x'.repeat(19)}`
export const initialHandle = (a: Account): string => `${a.toLowerCase()}.test`

export function uriOf(ref: Ref): string {
  const [account, kind, rkey] = ref.split('/') as [Account, Kind, string]
  return `at://${didOf(account)}/${COLLECTIONS[kind]}/${rkey}`
}

export const opKind = (op: Op): Kind =>
  'create' in op ? op.create : 'update' in op ? op.update : op.delete

export const opAction = (op: Op): 'create' | 'update' | 'delete' =>
  'create' in op ? 'create' : 'update' in op ? 'update' : 'delete'

/** Event times, in firehose order. */
export function eventTimes(seq: FuzzEvent[]): string[] {
  let t = START_TIME
  return seq.map((e) => {
    t += (e.dt ?? 1) * 1000
    return new Date(t).toISOString()
  })
}

/** The identity facts the network shows: DID documents' claims, well-known answers, hosting. */
export interface World {
  claims: Record<string, string>
  wellKnown: Record<string, string>
  /** DIDs whose PDS answers RepoNotFound. */
  gone: string[]
}

/** Events [start, end) that see one world. */
export interface Segment {
  start: number
  end: number
  world: World
}

/**
 * Cuts the sequence where the world changes in a way a batched lookup could see out of order:
 * before a handle change, before a return after deletion, and before a real deletion of an
 * account whose deletion was already looked up in the segment (a false alarm). Each segment
 * sees the world as it is after its last event: a real deletion only matters to the deletion
 * event's own lookup, which both indexers make after it.
 */
export function segmentsOf(seq: FuzzEvent[]): Segment[] {
  const claims: Record<string, string> = {}
  const wellKnown: Record<string, string> = {}
  const gone = new Set<string>()
  for (const a of ACCOUNTS) {
    claims[didOf(a)] = initialHandle(a)
    wellKnown[initialHandle(a)] = didOf(a)
  }
  const out: Segment[] = []
  let start = 0
  let asked = new Set<string>()
  const cut = (end: number) => {
    if (end > start) {
      out.push({
        start,
        end,
        world: { claims: { ...claims }, wellKnown: { ...wellKnown }, gone: [...gone] },
      })
    }
    start = end
    asked = new Set()
  }
  for (const [i, e] of seq.entries()) {
    const did = didOf(e.by)
    if ('identity' in e && e.identity.handle !== undefined) {
      const handle = e.identity.handle.toLowerCase()
      const verified = e.identity.verified !== false
      if (claims[did] !== handle || (verified && wellKnown[handle] !== did)) cut(i)
      claims[did] = handle
      if (verified) wellKnown[handle] = did
    } else if ('account' in e && e.account === 'active' && gone.has(did)) {
      cut(i)
      gone.delete(did)
    } else if ('account' in e && e.account === 'deleted') {
      if (!e.hosted && !gone.has(did)) {
        if (asked.has(did)) cut(i)
        gone.add(did)
      }
      asked.add(did)
    }
  }
  cut(seq.length)
  return out
}

export interface ConcreteOp {
  action: 'create' | 'update' | 'delete'
  collection: string
  rkey: string
  record?: Record<string, unknown>
}

/** The records of every commit, with references resolved to the subjects' current CIDs. */
export async function records(seq: FuzzEvent[]): Promise<(ConcreteOp[] | null)[]> {
  const times = eventTimes(seq)
  const cids = new Map<string, string>()
  const out: (ConcreteOp[] | null)[] = []
  for (const [i, e] of seq.entries()) {
    if (!('ops' in e)) {
      out.push(null)
      continue
    }
    const ops: ConcreteOp[] = []
    for (const op of e.ops) {
      const kind = opKind(op)
      const collection = COLLECTIONS[kind]
      const uri = `at://${didOf(e.by)}/${collection}/${op.rkey}`
      if ('delete' in op) {
        cids.delete(uri)
        ops.push({ action: 'delete', collection, rkey: op.rkey })
        continue
      }
      const record = await build(kind, op, times[i]!, cids, `${e.by}/post/${op.rkey}`)
      cids.set(uri, (await cidForLex(record as never)).toString())
      ops.push({ action: opAction(op), collection, rkey: op.rkey, record })
    }
    out.push(ops)
  }
  return out
}

const IMAGE_CID = 'bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy'

async function strongRef(ref: Ref, cids: Map<string, string>, stale?: boolean) {
  const uri = uriOf(ref)
  const current = cids.get(uri)
  const cid = current && !stale ? current : (await cidForLex({ missing: uri } as never)).toString()
  return { uri, cid }
}

/**
 * A blob as it decodes from CBOR: its ref is a CID. `jsonShaped`: a ref that is a `{ $link }`
 * map in the CBOR itself (bad input, which the stock refuses).
 */
const blobOf = (cid: string, mimeType = 'image/jpeg', jsonShaped = false) => {
  const value = { $type: 'blob', ref: { $link: cid }, mimeType, size: 1000 }
  return jsonShaped ? value : jsonToLex(value)
}

function subjectDid(p: Params): string {
  const s = p.subject ?? 'A'
  return didOf((s.includes('/') ? s.split('/')[0] : s) as Account)
}

async function build(
  kind: Kind,
  p: Params,
  time: string,
  cids: Map<string, string>,
  /** The post a gate with this key gates. */
  gated: Ref,
): Promise<Record<string, unknown>> {
  const createdAt = new Date(Date.parse(time) + (p.skew ?? 0) * 1000).toISOString()
  const $type = COLLECTIONS[kind]
  const base: Record<string, unknown> = p.noCreatedAt ? { $type } : { $type, createdAt }
  const ref = (r: Ref) => strongRef(r, cids, p.staleCid)
  const recordSubject = () => (p.subject?.includes('/') ? (p.subject as Ref) : 'A/post/none')
  switch (kind) {
    case 'post': {
      const post: Record<string, unknown> = { ...base, text: p.text ?? '' }
      if (p.reply) post.reply = { root: await ref(p.reply[0]), parent: await ref(p.reply[1]) }
      if (p.mention) {
        const text = `${p.text ?? ''} @${p.mention}`
        post.text = text
        post.facets = [
          {
            index: { byteStart: text.length - 2, byteEnd: text.length },
            features: [{ $type: 'app.bsky.richtext.facet#mention', did: didOf(p.mention) }],
          },
        ]
      }
      const media = p.media ? mediaEmbed(p.media, !!p.jsonShapedBlob) : undefined
      if (p.quote) {
        const record = { $type: 'app.bsky.embed.record', record: await ref(p.quote) }
        post.embed = media ? { $type: 'app.bsky.embed.recordWithMedia', record, media } : record
      } else if (media) {
        post.embed = media
      }
      return post
    }
    case 'like':
    case 'repost': {
      const rec: Record<string, unknown> = { ...base, subject: await ref(recordSubject()) }
      if (p.via) rec.via = await ref(p.via)
      return rec
    }
    case 'follow':
    case 'block':
      return { ...base, subject: subjectDid(p) }
    case 'list':
      return {
        ...base,
        name: p.text ?? 'a list',
        purpose: `app.bsky.graph.defs#${p.purpose ?? 'curate'}list`,
      }
    case 'listitem':
      return { ...base, subject: subjectDid(p), list: uriOf(p.list ?? 'A/list/none') }
    case 'listblock':
    case 'optout':
      return { ...base, subject: uriOf(recordSubject()) }
    case 'threadgate': {
      const gate: Record<string, unknown> = { ...base, post: uriOf((p.subject as Ref) ?? gated) }
      if (p.allow) {
        gate.allow = p.allow.map((rule) =>
          rule === 'list'
            ? { $type: 'app.bsky.feed.threadgate#listRule', list: uriOf(p.list ?? 'A/list/none') }
            : { $type: `app.bsky.feed.threadgate#${rule}Rule` },
        )
      }
      if (p.hidden) gate.hiddenReplies = p.hidden.map(uriOf)
      return gate
    }
    case 'postgate': {
      const gate: Record<string, unknown> = { ...base, post: uriOf((p.subject as Ref) ?? gated) }
      if (p.detached) gate.detachedEmbeddingUris = p.detached.map(uriOf)
      if (p.noEmbed) gate.embeddingRules = [{ $type: 'app.bsky.feed.postgate#disableRule' }]
      return gate
    }
    case 'generator':
      return { ...base, did: 'did:web:feeds.test', displayName: p.text ?? 'a feed' }
    case 'starterpack':
      return { ...base, name: p.text ?? 'a pack', list: uriOf(p.list ?? 'A/list/none') }
    case 'labeler':
      return { ...base, policies: { labelValues: ['spam', 'rude'] } }
    case 'verification':
      return {
        ...base,
        subject: subjectDid(p),
        handle: p.handle ?? 'someone.test',
        displayName: p.text ?? 'Someone',
      }
    case 'profile': {
      const profile: Record<string, unknown> = { ...base, displayName: p.text ?? 'Name' }
      if (p.pinned) profile.pinnedPost = await ref(p.pinned)
      if (p.joinedVia) profile.joinedViaStarterPack = await ref(p.joinedVia)
      return profile
    }
    case 'chat':
      return { $type, allowIncoming: 'following' }
    case 'germ':
      return {
        $type,
        version: '1.0.0',
        currentKey: jsonToLex({ $bytes: 'AAAA' }),
        messageMe: { showButtonTo: 'everyone', messageMeUrl: 'https://germ.test/m' },
      }
    case 'notifdecl':
      return { $type, allowSubscriptions: 'followers' }
    case 'status':
      return { ...base, status: 'app.bsky.actor.status#live', durationMinutes: 30 }
    case 'site':
      return {
        ...base,
        title: p.text ?? 'a page',
        site: 'https://site.test',
        publishedAt: createdAt,
      }
  }
}

function mediaEmbed(
  media: NonNullable<Params['media']>,
  jsonShaped: boolean,
): Record<string, unknown> {
  const blob = (cid: string, mimeType?: string) => blobOf(cid, mimeType, jsonShaped)
  switch (media) {
    case 'images':
      return {
        $type: 'app.bsky.embed.images',
        images: [
          { image: blob(IMAGE_CID), alt: 'one' },
          { image: blob(IMAGE_CID), alt: 'two' },
        ],
      }
    case 'external':
      return {
        $type: 'app.bsky.embed.external',
        external: { uri: 'https://example.test/a', title: 'A', description: 'An external' },
      }
    case 'video':
      return { $type: 'app.bsky.embed.video', video: blob(IMAGE_CID, 'video/mp4') }
    case 'gallery':
      return {
        $type: 'app.bsky.embed.gallery',
        items: [
          {
            $type: 'app.bsky.embed.gallery#image',
            image: blob(IMAGE_CID),
            alt: 'g',
            aspectRatio: { width: 4, height: 3 },
          },
        ],
      }
  }
}
