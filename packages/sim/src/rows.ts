// The rows of a userbase in the stock dataplane's tables, as COPY text lines: what the stock indexer
// would have written had it indexed these repos (record JSON with DAG-CBOR key order, follow and
// post URIs with TID keys, counters that match the rows). Pure: no database here, so the bytes can
// be hashed in a test.
import { cidFor, didFor, handleFor, tid } from './ids.ts'
import type { UserbaseParams } from './params.ts'
import { followersOf, tierIndex, totalFollows } from './powerlaw.ts'
import { hash32, Rng } from './rng.ts'
import { buildFollowerModel, followGraph, type FollowerModel } from './userbase.ts'

export const TABLES = {
  actor: ['did', 'handle', '"indexedAt"'],
  profile: ['uri', 'cid', 'creator', '"displayName"', 'description', '"indexedAt"', '"createdAt"'],
  follow: ['uri', 'cid', 'creator', '"subjectDid"', '"createdAt"', '"indexedAt"'],
  post: ['uri', 'cid', 'creator', 'text', '"createdAt"', '"indexedAt"'],
  feed_item: ['uri', 'cid', 'type', '"postUri"', '"originatorDid"', '"sortAt"'],
  record: ['uri', 'cid', 'did', 'json', '"indexedAt"'],
  profile_agg: ['did', '"followersCount"', '"followsCount"', '"postsCount"'],
} as const

export type Table = keyof typeof TABLES

/** Where lines of one table go. A returned promise means "wait before pushing more". */
export interface RowSink {
  push(line: string): Promise<void> | undefined
}

export type RowSinks = Record<Table, RowSink>

export interface RowCounts {
  actors: number
  follows: number
  posts: number
}

export interface RowProgress {
  (phase: 'actors' | 'follows' | 'posts', done: number, total: number): void
}

const DAY_MS = 86_400_000
/** Users joined during the first month of a 400-day history; follows fill the last 365 days. */
const JOIN_BEFORE_MS = 400 * DAY_MS
const JOIN_SPREAD_MS = 30 * DAY_MS
/** Follow times are slots of 2^20 µs (~1 s); the low 20 bits of the µs encode the subject. */
const SLOT_US = 1 << 20
const FOLLOW_SLOTS = Math.floor((365 * DAY_MS * 1000) / SLOT_US)
const SALT_FOLLOW = 0x666f6c77
const SALT_POST = 0x706f7374

// COPY's text format: backslash, tab, newline and carriage return must be escaped.
const escapeCopy = (s: string): string => s.replace(/[\\\t\n\r]/g, (c) => COPY_ESCAPES[c]!)
const COPY_ESCAPES: Record<string, string> = { '\\': '\\\\', '\t': '\\t', '\n': '\\n', '\r': '\\r' }

const iso = (ms: number): string => new Date(ms).toISOString()

/** A bijection on [0, 2^30): an odd multiplier, then an xorshift. */
function scramble30(x: number): number {
  const y = Math.imul(x, 0x2545f491) & 0x3fffffff
  return y ^ (y >>> 15)
}

export function joinedAtMs(params: UserbaseParams, id: number): number {
  const epoch = Date.parse(params.epoch)
  return epoch - JOIN_BEFORE_MS + Math.floor((id / params.num_users) * JOIN_SPREAD_MS)
}

/**
 * Pushes every row of the userbase to the sinks: actors and profiles, follows, existing posts,
 * then profile_agg (which needs the counts of the others).
 */
export async function writeUserbaseRows(
  params: UserbaseParams,
  sinks: RowSinks,
  progress?: RowProgress,
  model: FollowerModel = buildFollowerModel(params),
): Promise<RowCounts> {
  const n = params.num_users
  // A sink returns a promise only when it wants the producer to wait: no promise per row.
  let pending: Promise<void> | undefined

  for (let id = 1; id <= n; id++) {
    const did = didFor(id)
    const joined = iso(joinedAtMs(params, id))
    const uri = `at://${did}/app.bsky.actor.profile/self`
    const cid = cidFor(params.seed, 0x70726f66, id)
    const displayName = `User ${id}`
    const description = `Simulated user ${id} of ${params.name}`
    // Key order as the stock stores it: DAG-CBOR's (shorter keys first, then bytewise).
    const json =
      `{"$type":"app.bsky.actor.profile","createdAt":"${joined}",` +
      `"description":${JSON.stringify(description)},"displayName":${JSON.stringify(displayName)}}`
    pending = sinks.actor.push(`${did}\t${handleFor(id, params.handle_domain)}\t${joined}\n`)
    if (pending) await pending
    pending = sinks.profile.push(
      `${uri}\t${cid}\t${did}\t${escapeCopy(displayName)}\t${escapeCopy(description)}\t` +
        `${joined}\t${joined}\n`,
    )
    if (pending) await pending
    pending = sinks.record.push(`${uri}\t${cid}\t${did}\t${escapeCopy(json)}\t${joined}\n`)
    if (pending) await pending
    if (id % 65536 === 0) progress?.('actors', id, n)
  }
  progress?.('actors', n, n)

  const outDegree = new Int32Array(n + 1)
  const followsTotal = totalFollows(params.num_users, params.follower_density)
  const followStart = Math.floor((Date.parse(params.epoch) * 1000) / SLOT_US) - FOLLOW_SLOTS
  let follows = 0
  for (const { subject, followers } of followGraph(params, outDegree, model)) {
    const subjectDid = didFor(subject)
    const subjectBits = scramble30(subject)
    for (let i = 0; i < followers.length; i++) {
      const creator = followers[i]!
      const h = hash32(params.seed, SALT_FOLLOW, creator, subject)
      // The time slot comes from the hash, the µs within it and the TID clock id from a bijection
      // of the subject: a creator's follow keys can never collide, and the times look random.
      const micros = (followStart + (h % FOLLOW_SLOTS)) * SLOT_US + (subjectBits >>> 10)
      const createdMs = Math.floor(micros / 1000)
      const createdAt = iso(createdMs)
      const indexedAt = iso(createdMs + (h >>> 21))
      const creatorDid = didFor(creator)
      const uri = `at://${creatorDid}/app.bsky.graph.follow/${tid(micros, subjectBits & 1023)}`
      const cid = cidFor(params.seed, SALT_FOLLOW, creator, subject)
      pending = sinks.follow.push(
        `${uri}\t${cid}\t${creatorDid}\t${subjectDid}\t${createdAt}\t${indexedAt}\n`,
      )
      if (pending) await pending
      pending = sinks.record.push(
        `${uri}\t${cid}\t${creatorDid}\t{"$type":"app.bsky.graph.follow","subject":"${subjectDid}",` +
          `"createdAt":"${createdAt}"}\t${indexedAt}\n`,
      )
      if (pending) await pending
      // Inside the loop: the first subjects alone hold most of the follows.
      if ((++follows & 0xffff) === 0) progress?.('follows', follows, followsTotal)
    }
  }
  progress?.('follows', follows, follows)

  const postsCount = new Int32Array(n + 1)
  const posts = await writeExistingPosts(params, sinks, postsCount, progress)

  for (let id = 1; id <= n; id++) {
    const followers = followersOf(id, n, params.follower_density)
    pending = sinks.profile_agg.push(
      `${didFor(id)}\t${followers}\t${outDegree[id]}\t${postsCount[id]}\n`,
    )
    if (pending) await pending
  }
  return { actors: n, follows, posts }
}

async function writeExistingPosts(
  params: UserbaseParams,
  sinks: RowSinks,
  postsCount: Int32Array,
  progress?: RowProgress,
): Promise<number> {
  const history = params.existing_posts
  if (!history) return 0
  const active = params.max_active_user_id
  const endUs = Date.parse(params.epoch) * 1000
  const spanUs = history.days * DAY_MS * 1000
  let total = 0
  let pending: Promise<void> | undefined
  for (let user = 1; user <= active; user++) {
    const rng = new Rng(params.seed, SALT_POST, user)
    const tier =
      history.tiers[
        tierIndex(history.tiers, followersOf(user, params.num_users, params.follower_density))
      ]!
    const count = rng.poisson(tier.posts_per_day * history.days)
    if (count === 0) continue
    const times = new Float64Array(count)
    for (let i = 0; i < count; i++) times[i] = endUs - spanUs + Math.floor(rng.float() * spanUs)
    times.sort()
    // Strictly increasing microseconds: one repo never repeats a TID.
    for (let i = 1; i < count; i++) if (times[i]! <= times[i - 1]!) times[i] = times[i - 1]! + 1
    const did = didFor(user)
    for (let i = 0; i < count; i++) {
      const micros = times[i]!
      const createdMs = Math.floor(micros / 1000)
      const createdAt = iso(createdMs)
      const indexedAt = iso(createdMs + 1 + rng.int(500))
      const uri = `at://${did}/app.bsky.feed.post/${tid(micros, rng.int(1024))}`
      const cid = cidFor(params.seed, SALT_POST, user, i)
      const text = `Post ${i + 1} of user${user}`
      pending = sinks.post.push(`${uri}\t${cid}\t${did}\t${text}\t${createdAt}\t${indexedAt}\n`)
      if (pending) await pending
      pending = sinks.feed_item.push(`${uri}\t${cid}\tpost\t${uri}\t${did}\t${createdAt}\n`)
      if (pending) await pending
      pending = sinks.record.push(
        `${uri}\t${cid}\t${did}\t{"text":"${text}","$type":"app.bsky.feed.post",` +
          `"createdAt":"${createdAt}"}\t${indexedAt}\n`,
      )
      if (pending) await pending
    }
    postsCount[user] = count
    total += count
    if (user % 1024 === 0) progress?.('posts', user, active)
  }
  progress?.('posts', active, active)
  return total
}
