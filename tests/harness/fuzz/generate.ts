// Random valid sequences from a seed: creates, updates and deletes of every kind the plugins
// index, re-creation at a used rkey, multi-op commits, subjects that do not exist (yet, or any
// more), self-interactions, account status changes, deletion and return, handle changes and
// takeovers. Subjects are drawn with a heavy bias towards the first few, so interactions pile
// up on few posts and accounts, where the writer's bookkeeping is hardest.
import { Rng } from '@openplane/sim'
import {
  ACCOUNTS,
  initialHandle,
  type Account,
  type AccountStatus,
  type FuzzEvent,
  type Kind,
  type Op,
  type Params,
  type Ref,
} from './sequence.ts'

export interface GenerateOptions {
  /** Events in the sequence. */
  length: number
  /** Accounts taking part (2 to 6). */
  accounts?: number
}

/** Kinds of new records, with weights close to the network's mix (likes dominate). */
const CREATE_WEIGHTS: [Kind, number][] = [
  ['like', 26],
  ['post', 24],
  ['repost', 10],
  ['follow', 12],
  ['block', 3],
  ['list', 3],
  ['listitem', 4],
  ['listblock', 1],
  ['optout', 1],
  ['threadgate', 3],
  ['postgate', 2],
  ['generator', 1],
  ['starterpack', 1],
  ['labeler', 1],
  ['verification', 1],
  ['profile', 3],
  ['chat', 0.5],
  ['germ', 0.5],
  ['notifdecl', 0.5],
  ['status', 0.5],
  ['site', 0.5],
]

/** Kinds whose record key is `self` (or, for gates, the gated post's). */
const SELF_KEYED = new Set<Kind>(['profile', 'labeler', 'chat', 'germ', 'notifdecl', 'status'])

export function generate(seed: number, opts: GenerateOptions): FuzzEvent[] {
  return new Generator(seed, opts).run()
}

class Generator {
  private readonly rng: Rng
  private readonly opts: Required<GenerateOptions>
  private readonly accounts: Account[]
  /** Records that exist now, per account and kind (rkeys). */
  private readonly live = new Map<string, string[]>()
  /** Every ref ever created, for references to things that are gone. */
  private readonly everCreated: Ref[] = []
  /** Rkeys used before, per account and kind, for re-creation. */
  private readonly used = new Map<string, string[]>()
  private readonly roots = new Map<Ref, Ref>()
  private readonly handles = new Map<Account, string>()
  private readonly deleted = new Set<Account>()
  private counter = 0
  private out: FuzzEvent[] = []

  constructor(seed: number, opts: GenerateOptions) {
    this.rng = new Rng(seed, 0x5eed)
    this.opts = { accounts: 2 + this.rng.int(5), ...opts }
    this.accounts = ACCOUNTS.slice(0, Math.max(2, Math.min(6, this.opts.accounts)))
    for (const a of this.accounts) this.handles.set(a, initialHandle(a))
  }

  run(): FuzzEvent[] {
    this.out = []
    while (this.out.length < this.opts.length) {
      const by = this.account()
      const r = this.rng.float()
      const dt = this.rng.float() < 0.03 ? 2 * 86400 : this.rng.float() < 0.05 ? 7200 : undefined
      let e: FuzzEvent
      if (r < 0.06) e = this.identity(by)
      else if (r < 0.12) e = this.accountEvent(by)
      else if (r < 0.13) e = { by, sync: true }
      else e = { by, ops: this.ops(by) }
      if (dt) e.dt = dt
      this.out.push(e)
    }
    return this.out
  }

  // ---- picking -------------------------------------------------------------------------------

  private pick<T>(list: readonly T[]): T {
    return list[this.rng.int(list.length)]!
  }

  /** Biased to the front: the first few items take most draws. */
  private hot<T>(list: readonly T[]): T {
    return list[Math.floor(list.length * this.rng.float() ** 3)]!
  }

  private account(): Account {
    return this.hot(this.accounts)
  }

  private weighted<T>(table: [T, number][]): T {
    const total = table.reduce((s, [, w]) => s + w, 0)
    let x = this.rng.float() * total
    for (const [v, w] of table) if ((x -= w) < 0) return v
    return table[table.length - 1]![0]
  }

  private liveOf(by: Account, kind: Kind): string[] {
    return this.live.get(`${by}/${kind}`) ?? []
  }

  /** Every live record of a kind, oldest first. */
  private allLive(kind: Kind): Ref[] {
    const out: Ref[] = []
    for (const a of this.accounts)
      for (const rkey of this.liveOf(a, kind)) out.push(`${a}/${kind}/${rkey}`)
    return out
  }

  /** A subject record: usually a live one (hot), sometimes gone or not there yet. */
  private subject(kind: Kind): Ref {
    const live = this.allLive(kind)
    const r = this.rng.float()
    if (live.length && r < 0.82) return this.hot(live)
    const gone = this.everCreated.filter((ref) => ref.split('/')[1] === kind)
    if (gone.length && r < 0.92) return this.pick(gone)
    // Not created yet: a key this sequence may still use.
    return `${this.pick(this.accounts)}/${kind}/${kind[0]}${this.counter + 1 + this.rng.int(4)}`
  }

  private newRkey(by: Account, kind: Kind): string {
    const used = this.used.get(`${by}/${kind}`) ?? []
    const live = new Set(this.liveOf(by, kind))
    const free = used.filter((k) => !live.has(k))
    if (free.length && this.rng.float() < 0.2) return this.pick(free)
    return `${kind[0]}${++this.counter}`
  }

  private noteCreated(by: Account, kind: Kind, rkey: string): void {
    const key = `${by}/${kind}`
    if (!this.liveOf(by, kind).includes(rkey)) this.live.set(key, [...this.liveOf(by, kind), rkey])
    const used = this.used.get(key) ?? []
    if (!used.includes(rkey)) this.used.set(key, [...used, rkey])
    const ref: Ref = `${by}/${kind}/${rkey}`
    if (!this.everCreated.includes(ref)) this.everCreated.push(ref)
  }

  private noteDeleted(by: Account, kind: Kind, rkey: string): void {
    this.live.set(
      `${by}/${kind}`,
      this.liveOf(by, kind).filter((k) => k !== rkey),
    )
  }

  // ---- events --------------------------------------------------------------------------------

  private identity(by: Account): FuzzEvent {
    const r = this.rng.float()
    if (r < 0.15) return { by, identity: {} }
    let handle: string
    if (r < 0.4) {
      // Take over someone else's handle.
      const other = this.pick(this.accounts.filter((a) => a !== by))
      handle = this.handles.get(other)!
    } else if (r < 0.5) {
      handle = initialHandle(by)
    } else {
      handle = `${by.toLowerCase()}${++this.counter}.test`
    }
    this.handles.set(by, handle)
    return this.rng.float() < 0.15
      ? { by, identity: { handle, verified: false } }
      : { by, identity: { handle } }
  }

  private accountEvent(by: Account): FuzzEvent {
    const r = this.rng.float()
    if (this.deleted.has(by) && r < 0.6) {
      this.deleted.delete(by)
      return { by, account: 'active' }
    }
    if (r < 0.25) {
      if (this.rng.float() < 0.2) return { by, account: 'deleted', hosted: true }
      this.deleted.add(by)
      for (const key of [...this.live.keys()]) if (key.startsWith(`${by}/`)) this.live.delete(key)
      return { by, account: 'deleted' }
    }
    const status: AccountStatus = this.pick(['active', 'deactivated', 'takendown', 'suspended'])
    return { by, account: status }
  }

  /**
   * Two records of one commit never compete for one uniqueness slot (a second like of the same
   * subject): they would share indexedAt, and which of them the stock promotes when the slot's
   * holder goes is left to its query plan (it orders duplicates by indexedAt alone).
   */
  private ops(by: Account): Op[] {
    const n = this.rng.float() < 0.25 ? 2 + this.rng.int(3) : 1
    const ops: Op[] = []
    const slots = new Set<string>()
    for (let i = 0; i < n; i++) {
      const op = this.op(by)
      const slot = slotOf(op)
      if (slot && slots.has(slot)) continue
      if (slot) slots.add(slot)
      ops.push(op)
    }
    return ops
  }

  private op(by: Account): Op {
    const r = this.rng.float()
    const mine = [...this.live.entries()].filter(([k, v]) => k.startsWith(`${by}/`) && v.length)
    if (mine.length && r < 0.22) {
      const [key, rkeys] = this.pick(mine)
      const kind = key.split('/')[1] as Kind
      const rkey = this.pick(rkeys)
      this.noteDeleted(by, kind, rkey)
      return { delete: kind, rkey }
    }
    if (mine.length && r < 0.34) {
      const [key, rkeys] = this.pick(mine)
      const kind = key.split('/')[1] as Kind
      const rkey = this.pick(rkeys)
      return { update: kind, rkey, ...this.params(by, kind, rkey) }
    }
    if (r < 0.37) {
      // A delete or update of something that is not there.
      const kind = this.weighted(CREATE_WEIGHTS)
      const rkey = `${kind[0]}${this.counter + 1 + this.rng.int(3)}`
      return this.rng.float() < 0.5
        ? { delete: kind, rkey }
        : { update: kind, rkey, ...this.params(by, kind, rkey) }
    }
    const kind = this.weighted(CREATE_WEIGHTS)
    let rkey = SELF_KEYED.has(kind) ? 'self' : this.newRkey(by, kind)
    // A gate's key is its post's: gate one of the account's posts (or one that is not there).
    if (kind === 'threadgate' || kind === 'postgate') {
      const posts = this.liveOf(by, 'post')
      rkey = posts.length && this.rng.float() < 0.85 ? this.hot(posts) : `p${this.counter + 1}`
    }
    if (kind === 'profile' && this.rng.float() < 0.1) rkey = this.newRkey(by, kind)
    const params = this.params(by, kind, rkey)
    this.noteCreated(by, kind, rkey)
    return { create: kind, rkey, ...params }
  }

  private params(by: Account, kind: Kind, rkey: string): Params {
    const rng = this.rng
    const p: Params = {}
    if (rng.float() < 0.05) p.staleCid = true
    if (rng.float() < 0.05) p.skew = rng.float() < 0.5 ? -86400 * 3 : 86400 * 400
    switch (kind) {
      case 'post': {
        p.text = `t${++this.counter}`
        const here: Ref = `${by}/post/${rkey}`
        if (rng.float() < 0.4) {
          const parent = this.subject('post')
          const root = this.roots.get(parent) ?? parent
          p.reply = [rng.float() < 0.08 ? this.subject('post') : root, parent]
          this.roots.set(here, p.reply[0])
        } else {
          this.roots.delete(here)
        }
        if (rng.float() < 0.18)
          p.quote = rng.float() < 0.9 ? this.subject('post') : this.subject('list')
        if (rng.float() < 0.12) p.mention = this.pick(this.accounts)
        if (rng.float() < 0.2) {
          p.media = this.pick(['images', 'external', 'video', 'gallery'] as const)
          if (rng.float() < 0.05) p.jsonShapedBlob = true
        }
        return p
      }
      case 'like':
      case 'repost':
        p.subject = rng.float() < 0.95 ? this.subject('post') : this.subject('generator')
        if (rng.float() < 0.15) p.via = this.subject('repost')
        return p
      case 'follow':
      case 'block':
      case 'verification':
        p.subject = this.hot(this.accounts)
        if (kind === 'verification') p.handle = this.handles.get(p.subject)
        return p
      case 'list':
        p.purpose = this.pick(['curate', 'mod', 'reference'] as const)
        p.text = `list ${this.counter}`
        return p
      case 'listitem':
        p.subject = this.pick(this.accounts)
        p.list = this.subject('list')
        return p
      case 'listblock':
      case 'optout':
        p.subject = this.subject('list')
        return p
      case 'starterpack':
        p.list = this.subject('list')
        return p
      case 'threadgate':
        // Now and then a gate away from its post, which the stock drops outright.
        p.subject = rng.float() < 0.08 ? this.subject('post') : `${by}/post/${rkey}`
        if (rng.float() < 0.7) {
          p.allow = (['mention', 'follower', 'following', 'list'] as const).filter(
            () => rng.float() < 0.35,
          )
          if (p.allow.includes('list')) p.list = this.subject('list')
        }
        if (rng.float() < 0.4) p.hidden = [this.subject('post')]
        return p
      case 'postgate':
        p.subject = rng.float() < 0.08 ? this.subject('post') : `${by}/post/${rkey}`
        if (rng.float() < 0.5) p.detached = [this.subject('post')]
        if (rng.float() < 0.5) p.noEmbed = true
        return p
      case 'profile':
        p.text = `name ${this.counter}`
        if (rng.float() < 0.2) p.pinned = this.subject('post')
        if (rng.float() < 0.2) p.joinedVia = this.subject('starterpack')
        if (rng.float() < 0.1) p.noCreatedAt = true
        return p
      default:
        return p
    }
  }
}

/** The uniqueness slot a create or update competes for, beside its uri (none for most kinds). */
function slotOf(op: Op): string | undefined {
  if ('delete' in op) return undefined
  const kind = 'create' in op ? op.create : op.update
  switch (kind) {
    case 'like':
    case 'repost':
    case 'listblock':
    case 'optout':
    case 'follow':
    case 'block':
    case 'verification':
      return `${kind} ${op.subject ?? ''}`
    case 'listitem':
      return `${kind} ${op.list ?? ''} ${op.subject ?? ''}`
    case 'threadgate':
    case 'postgate':
      return `${kind} ${op.subject ?? op.rkey}`
    default:
      return undefined
  }
}
