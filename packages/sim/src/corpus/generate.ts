// The network's activity as a deterministic sequence of repo operations: who acts (a power law
// over repos: a few very active, a long tail), what they do (the mix), and on what (popular
// users and posts draw more follows, likes and replies; threads grow from recent posts). Record
// bodies are encoded here, so strong refs carry the real CIDs of the records they point at.
// Signing and framing are the recorder's job; this part is pure and fast. One class at this
// length because a corpus is reproducible only if every draw comes from one random stream in one
// order: the choice of actor, action and target, and the pools they draw from, change together.
import { cidOf, cidToString, CborWriter, Link, type Block, type CborValue } from '../emit/cbor.ts'
import { didFor, handleFor, tid } from '../ids.ts'
import { hash32, Rng } from '../rng.ts'
import { ACTIONS, mixShares, type Action, type FirehoseParams } from './params.ts'
import { postText, words } from './words.ts'

/**
 * Changes whenever the generator's output for the same parameters does (tests/sim/corpus.test.ts
 * pins it): corpora recorded by another version are other data, and caches key on it.
 * 2: post text drawn by Zipf's law from a 20,000-word vocabulary (words.ts).
 */
export const GENERATOR_VERSION = 2

export type RepoOp =
  | { action: 'create' | 'update'; collection: string; rkey: string; record: Block }
  | { action: 'delete'; collection: string; rkey: string }

export type Step = { action: Action; user: number; timeUs: number } & (
  | { type: 'commit'; op: RepoOp }
  | { type: 'identity'; handle: string }
  | { type: 'account'; active: boolean }
)

interface PostRef {
  uri: string
  cid: string
  author: number
  root: { uri: string; cid: string } | null
}

interface Owned {
  user: number
  rkey: string
}

/** A multiset with O(1) add and O(1) uniform random removal. */
class Pool<T> {
  private items: T[] = []
  get size(): number {
    return this.items.length
  }
  add(item: T): void {
    this.items.push(item)
  }
  take(rng: Rng): T | undefined {
    if (!this.items.length) return undefined
    const i = rng.int(this.items.length)
    const item = this.items[i]!
    this.items[i] = this.items[this.items.length - 1]!
    this.items.pop()
    return item
  }
}

/** Draws ranks 1..n with weight r^-exponent (inverse CDF by binary search). */
class Zipf {
  private readonly cdf: Float64Array
  constructor(n: number, exponent: number) {
    this.cdf = new Float64Array(n)
    let total = 0
    for (let r = 1; r <= n; r++) {
      total += r ** -exponent
      this.cdf[r - 1] = total
    }
  }
  draw(rng: Rng): number {
    const x = rng.float() * this.cdf[this.cdf.length - 1]!
    let lo = 0
    let hi = this.cdf.length - 1
    while (lo < hi) {
      const mid = (lo + hi) >>> 1
      if (this.cdf[mid]! <= x) lo = mid + 1
      else hi = mid
    }
    return lo + 1
  }
}

const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b))

interface UserState {
  /** Newest last; a few are enough for "like one of their recent posts". */
  posts: PostRef[]
  lists: string[]
  hasProfile: boolean
  profileEdits: number
}

const RECENT_POSTS = 20_000
const POSTS_PER_USER = 8

/** Counts per action of what was actually emitted (a delete with nothing to delete falls back). */
export type ActionCounts = Record<Action, number>

export class FirehoseGenerator {
  readonly params: FirehoseParams
  readonly counts: ActionCounts
  private readonly rng: Rng
  private readonly cumulative: number[]
  private readonly activity: Zipf
  private readonly popularity: Zipf
  /** Activity rank → user id: the most active repos are not the most followed ones. */
  private readonly stride: number
  private readonly clockId: number
  private readonly startUs: number
  private readonly stepUs: number
  private readonly w = new CborWriter()
  private readonly users = new Map<number, UserState>()
  private readonly recent: PostRef[] = []
  private recentNext = 0
  private readonly deactivated = new Set<number>()
  private readonly listOwners: number[] = []
  private readonly pools = {
    like: new Pool<Owned>(),
    repost: new Pool<Owned>(),
    follow: new Pool<Owned>(),
    block: new Pool<Owned>(),
    listitem: new Pool<Owned>(),
    post: new Pool<Owned>(),
  }
  private index = 0
  private lastUs = 0

  constructor(params: FirehoseParams) {
    this.params = params
    this.rng = new Rng(params.seed, 0xf1e0)
    const shares = mixShares(params.mix)
    let acc = 0
    this.cumulative = ACTIONS.map((a) => (acc += shares[a]))
    this.counts = Object.fromEntries(ACTIONS.map((a) => [a, 0])) as ActionCounts
    this.activity = new Zipf(params.repos, params.activity_exponent)
    this.popularity = new Zipf(params.repos, params.popularity_exponent)
    let stride = (hash32(params.seed, 0x57) % params.repos) | 1
    while (gcd(stride, params.repos) !== 1) stride++
    this.stride = stride
    this.clockId = hash32(params.seed, 0x7e1d) & 1023
    this.startUs = Date.parse(params.start) * 1000
    this.stepUs = 1e6 / params.rate_per_second
  }

  get emitted(): number {
    return this.index
  }

  handle(user: number): string {
    return handleFor(user, this.params.handle_domain)
  }

  /** The next event, or undefined after `params.events`. */
  next(): Step | undefined {
    if (this.index >= this.params.events) return undefined
    // Exact spacing at the stream's rate, never two events in one microsecond (TIDs differ).
    const timeUs = Math.max(Math.floor(this.startUs + this.index * this.stepUs), this.lastUs + 1)
    this.lastUs = timeUs
    this.index++
    const u = this.rng.float()
    let pick = ACTIONS.findIndex((_, i) => u < this.cumulative[i]!)
    if (pick < 0) pick = ACTIONS.length - 1
    const step = this.make(ACTIONS[pick]!, timeUs)
    this.counts[step.action]++
    return step
  }

  private state(user: number): UserState {
    let s = this.users.get(user)
    if (!s) {
      s = { posts: [], lists: [], hasProfile: false, profileEdits: 0 }
      this.users.set(user, s)
    }
    return s
  }

  /** A repo that acts now: drawn by activity rank, never a deactivated one. */
  private actor(): number {
    for (;;) {
      const rank = this.activity.draw(this.rng)
      const user = ((((rank - 1) * this.stride) % this.params.repos) + 1) | 0
      if (!this.deactivated.has(user)) return user
    }
  }

  /** A popular user other than `not`. */
  private popular(not: number): number {
    for (;;) {
      const user = this.popularity.draw(this.rng)
      if (user !== not) return user
    }
  }

  private someone(not: number): number {
    for (;;) {
      const user = 1 + this.rng.int(this.params.repos)
      if (user !== not) return user
    }
  }

  /** A post to like, repost, quote or answer: a popular author's, else a recent one. */
  private targetPost(): PostRef | undefined {
    if (this.rng.float() < 0.4) {
      const posts = this.users.get(this.popularity.draw(this.rng))?.posts
      if (posts?.length) return posts[this.rng.int(posts.length)]
    }
    if (!this.recent.length) return undefined
    // Recent posts draw most of the attention: u³ leans hard towards the newest.
    const back = Math.floor(this.recent.length * this.rng.float() ** 3)
    const newest = (this.recentNext - 1 + this.recent.length) % this.recent.length
    return this.recent[(newest - back + this.recent.length) % this.recent.length]
  }

  private remember(post: PostRef): void {
    if (this.recent.length < RECENT_POSTS) this.recent.push(post)
    else this.recent[this.recentNext] = post
    this.recentNext = (this.recentNext + 1) % RECENT_POSTS
    const mine = this.state(post.author).posts
    mine.push(post)
    if (mine.length > POSTS_PER_USER) mine.shift()
  }

  private record(value: Record<string, CborValue | undefined>): Block {
    const bytes = this.w.value(value).finish()
    return { cid: cidOf(bytes), bytes }
  }

  private make(wanted: Action, timeUs: number): Step {
    const createdAt = new Date(Math.floor(timeUs / 1000)).toISOString()
    const rkey = tid(timeUs, this.clockId)
    const create = (action: Action, user: number, collection: string, value: object): Step => ({
      action,
      user,
      timeUs,
      type: 'commit',
      op: {
        action: 'create',
        collection,
        rkey,
        record: this.record({ $type: collection, ...value, createdAt }),
      },
    })
    const remove = (action: Action, owned: Owned, collection: string): Step => ({
      action,
      user: owned.user,
      timeUs,
      type: 'commit',
      op: { action: 'delete', collection, rkey: owned.rkey },
    })
    const strong = (p: PostRef) => ({ uri: p.uri, cid: p.cid })

    switch (wanted) {
      case 'like':
      case 'repost': {
        const subject = this.targetPost()
        if (!subject) return this.make('post', timeUs)
        const user = this.actor()
        const collection = wanted === 'like' ? 'app.bsky.feed.like' : 'app.bsky.feed.repost'
        this.pools[wanted].add({ user, rkey })
        return create(wanted, user, collection, { subject: strong(subject) })
      }
      case 'unlike':
      case 'unrepost': {
        const kind = wanted === 'unlike' ? 'like' : 'repost'
        const owned = this.takeActive(this.pools[kind])
        if (!owned) return this.make(kind, timeUs)
        return remove(wanted, owned, `app.bsky.feed.${kind}`)
      }
      case 'post':
      case 'reply':
      case 'quote': {
        const user = this.actor()
        const target = wanted === 'post' ? undefined : this.targetPost()
        if (wanted !== 'post' && !target) return this.make('post', timeUs)
        const value: Record<string, CborValue> = this.postBody(user, wanted === 'quote')
        let root: PostRef['root'] = null
        if (wanted === 'reply') {
          root = target!.root ?? strong(target!)
          value.reply = { root, parent: strong(target!) }
        } else if (wanted === 'quote') {
          value.embed = { $type: 'app.bsky.embed.record', record: strong(target!) }
        }
        const step = create(wanted, user, 'app.bsky.feed.post', value)
        const op = step.type === 'commit' && step.op.action !== 'delete' ? step.op : undefined
        const uri = `at://${didFor(user)}/app.bsky.feed.post/${rkey}`
        this.remember({ uri, cid: cidToString(op!.record.cid), author: user, root })
        this.pools.post.add({ user, rkey })
        return step
      }
      case 'post_delete': {
        const owned = this.takeActive(this.pools.post)
        if (!owned) return this.make('post', timeUs)
        return remove(wanted, owned, 'app.bsky.feed.post')
      }
      case 'follow':
      case 'block': {
        const user = this.actor()
        const subject = wanted === 'follow' ? this.popular(user) : this.someone(user)
        this.pools[wanted].add({ user, rkey })
        const collection = `app.bsky.graph.${wanted}`
        return create(wanted, user, collection, { subject: didFor(subject) })
      }
      case 'unfollow':
      case 'unblock': {
        const kind = wanted === 'unfollow' ? 'follow' : 'block'
        const owned = this.takeActive(this.pools[kind])
        if (!owned) return this.make(kind, timeUs)
        return remove(wanted, owned, `app.bsky.graph.${kind}`)
      }
      case 'profile': {
        const user = this.actor()
        const s = this.state(user)
        s.profileEdits++
        const record = this.record({
          $type: 'app.bsky.actor.profile',
          displayName: `User ${user}`,
          description: `edit ${s.profileEdits} of the profile of user ${user}`,
          createdAt,
        })
        const action = s.hasProfile ? 'update' : 'create'
        s.hasProfile = true
        const collection = 'app.bsky.actor.profile'
        return {
          action: wanted,
          user,
          timeUs,
          type: 'commit',
          op: { action, collection, rkey: 'self', record },
        }
      }
      case 'list': {
        const user = this.actor()
        if (!this.state(user).lists.length) this.listOwners.push(user)
        this.state(user).lists.push(`at://${didFor(user)}/app.bsky.graph.list/${rkey}`)
        return create(wanted, user, 'app.bsky.graph.list', {
          name: `list ${rkey}`,
          purpose: 'app.bsky.graph.defs#curatelist',
        })
      }
      case 'listitem': {
        // Curators fill their lists: items come from the owners of lists, not from anyone.
        if (!this.listOwners.length) return this.make('list', timeUs)
        const user = this.listOwners[this.rng.int(this.listOwners.length)]!
        if (this.deactivated.has(user)) return this.make('list', timeUs)
        const lists = this.state(user).lists
        this.pools.listitem.add({ user, rkey })
        return create(wanted, user, 'app.bsky.graph.listitem', {
          list: lists[this.rng.int(lists.length)]!,
          subject: didFor(this.popular(user)),
        })
      }
      case 'unlistitem': {
        const owned = this.takeActive(this.pools.listitem)
        if (!owned) return this.make('listitem', timeUs)
        return remove(wanted, owned, 'app.bsky.graph.listitem')
      }
      case 'identity': {
        const user = this.actor()
        return { action: wanted, user, timeUs, type: 'identity', handle: this.handle(user) }
      }
      case 'account': {
        // Deactivations come back: half of these events reactivate someone deactivated earlier.
        const back = this.deactivated.size && this.rng.float() < 0.5
        if (back) {
          const user = this.deactivated.values().next().value!
          this.deactivated.delete(user)
          return { action: wanted, user, timeUs, type: 'account', active: true }
        }
        const user = this.actor()
        this.deactivated.add(user)
        return { action: wanted, user, timeUs, type: 'account', active: false }
      }
    }
  }

  /** A record to delete whose owner is active (a deactivated account writes nothing). */
  private takeActive(pool: Pool<Owned>): Owned | undefined {
    const skipped: Owned[] = []
    let found: Owned | undefined
    while (!found) {
      const owned = pool.take(this.rng)
      if (!owned) break
      if (this.deactivated.has(owned.user)) skipped.push(owned)
      else found = owned
    }
    for (const s of skipped) pool.add(s)
    return found
  }

  private postBody(user: number, quoting: boolean): Record<string, CborValue> {
    const f = this.params.post_features
    let text = postText(this.rng, user)
    const value: Record<string, CborValue> = { langs: ['en'] }
    if (this.rng.float() < f.mention) {
      const mentioned = this.popular(user)
      const start = Buffer.byteLength(text) + 1
      const tag = `@${this.handle(mentioned)}`
      text += ` ${tag}`
      value.facets = [
        {
          index: { byteStart: start, byteEnd: start + Buffer.byteLength(tag) },
          features: [{ $type: 'app.bsky.richtext.facet#mention', did: didFor(mentioned) }],
        },
      ]
    }
    value.text = text
    // A quote carries its record embed; images and links go to plain posts and replies.
    if (quoting) return value
    const u = this.rng.float()
    if (u < f.images) {
      const n = 1 + this.rng.int(4)
      value.embed = {
        $type: 'app.bsky.embed.images',
        images: Array.from({ length: n }, (_, i) => ({
          alt: `image ${i + 1}`,
          image: {
            $type: 'blob',
            ref: new Link(blobCid(this.rng.u32(), this.rng.u32())),
            mimeType: 'image/jpeg',
            size: 20_000 + this.rng.int(900_000),
          },
        })),
      }
    } else if (u < f.images + f.external) {
      const n = this.rng.u32()
      value.embed = {
        $type: 'app.bsky.embed.external',
        external: {
          uri: `https://news.example.com/story/${n}`,
          title: `story ${n}`,
          description: words(this.rng, 10),
        },
      }
    }
    return value
  }
}

/** A raw-codec CIDv1 (what blob refs hold) whose digest comes from two numbers. */
function blobCid(a: number, b: number): string {
  let digest = ''
  let h = hash32(a, b)
  for (let i = 0; i < 32; i++) {
    if (i % 4 === 0) h = hash32(h, i)
    digest += String.fromCharCode((h >>> ((i % 4) * 8)) & 0xff)
  }
  return '\x01\x55\x12\x20' + digest
}
