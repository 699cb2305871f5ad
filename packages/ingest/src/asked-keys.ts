// Signing keys a decode worker asks the thread that started it for, when verifying. That thread
// passes the question to the writer's lookup thread, whose DID documents are the ones its handle
// checks use: a DID new to the index is resolved once, not once for its signature here and again
// for its handle there (on a network new to the index, that second round trip was about a tenth
// of a decode thread). Keys answered are kept here for as long as the lookups' cache calls a
// document fresh, so a known repo's frames are checked without a message; a signature that does
// not verify asks again with `refresh`, past every cache.
import type { KeyOf } from './commit-frame.ts'

/** A DID's signing key as a did:key, or null when its document has none (or no document). */
export type KeyLookup = (did: string, refresh: boolean) => Promise<string | null>

export interface KeyRequest {
  id: number
  did: string
  refresh: boolean
}
/** From a worker: the keys its frames wait for. */
export interface KeyRequests {
  keys: KeyRequest[]
}
export interface KeyReply {
  id: number
  key: string | null
  error?: string
}
/** To a worker: what the lookups answered. */
export interface KeyReplies {
  keyReplies: KeyReply[]
}

export interface AskedKeysOptions {
  /** Keys kept at most (least recently asked go first). */
  max: number
  /** How long a key answered stays usable without asking again. */
  freshMs: number
}

interface Waiting {
  resolve(key: string): void
  reject(err: Error): void
}

export class AskedKeys {
  private readonly send: (m: KeyRequests) => void
  private readonly opts: AskedKeysOptions
  private readonly known = new Map<string, { key: string; at: number }>()
  /** One question per DID and kind at a time: frames of one repo in a message share it. */
  private readonly asked = new Map<string, Promise<string>>()
  private readonly waiting = new Map<number, Waiting>()
  private outgoing: KeyRequest[] = []
  private nextId = 0

  constructor(send: (m: KeyRequests) => void, opts: AskedKeysOptions) {
    this.send = send
    this.opts = opts
  }

  readonly keyOf: KeyOf = (did, refresh) => {
    if (!refresh) {
      const hit = this.known.get(did)
      if (hit && Date.now() - hit.at < this.opts.freshMs) return Promise.resolve(hit.key)
    }
    const name = `${refresh ? 'r' : 'c'}${did}`
    const shared = this.asked.get(name)
    if (shared) return shared
    const id = this.nextId++
    const answer = new Promise<string>((resolve, reject) => {
      this.waiting.set(id, { resolve, reject })
    }).finally(() => this.asked.delete(name))
    this.asked.set(name, answer)
    // The frames of a message ask in one sweep: their questions leave in one message.
    if (!this.outgoing.length) setImmediate(() => this.flush())
    this.outgoing.push({ id, did, refresh })
    return answer.then((key) => {
      this.keep(did, key)
      return key
    })
  }

  answered({ keyReplies }: KeyReplies): void {
    for (const reply of keyReplies) {
      const w = this.waiting.get(reply.id)
      if (!w) continue
      this.waiting.delete(reply.id)
      if (reply.key) w.resolve(reply.key)
      else w.reject(new Error(reply.error ?? 'no signing key'))
    }
  }

  private flush(): void {
    const keys = this.outgoing
    this.outgoing = []
    if (keys.length) this.send({ keys })
  }

  private keep(did: string, key: string): void {
    this.known.delete(did)
    this.known.set(did, { key, at: Date.now() })
    if (this.known.size > this.opts.max) this.known.delete(this.known.keys().next().value!)
  }
}

/** A lookup's answer as a KeyOf wants it: the key, or a rejection naming the DID. */
export function keyOfLookup(lookup: KeyLookup): KeyOf {
  return async (did, refresh) => {
    const key = await lookup(did, refresh)
    if (!key) throw new Error(`no signing key for ${did}`)
    return key
  }
}

/** The thread that started a worker: its questions answered by `lookup`, in one message back. */
export async function answerKeys(lookup: KeyLookup, { keys }: KeyRequests): Promise<KeyReplies> {
  const keyReplies = await Promise.all(
    keys.map(({ id, did, refresh }) =>
      lookup(did, refresh).then(
        (key): KeyReply => ({ id, key }),
        (err: unknown): KeyReply => ({ id, key: null, error: (err as Error).message }),
      ),
    ),
  )
  return { keyReplies }
}
