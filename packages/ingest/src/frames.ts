// Firehose frames → IngestEvents. Every frame is decoded and checked on its own: a malformed one
// is reported to the caller as a reason string and never stops the stream.
import { decodeAll } from '@atproto/lex-cbor'
import {
  parseAccount,
  parseCommitAuthenticated,
  parseCommitUnauthenticated,
  parseSync,
} from '@atproto/sync'
import type { IdResolver } from '@atproto/identity'
import { decodeCommitFrame, verifyCommitFrame, type KeyOf } from './commit-frame.ts'
import { signingKeyOf } from '@openplane/signatures'
import type { CommitOp, IngestEvent } from './events.ts'
import { isDid, isObj, isSeq, isTime, type Obj } from './frame-values.ts'

export type FrameResult =
  /** `dropped`: ops the commit lists but whose record could not be read from its CAR. */
  | { kind: 'event'; event: IngestEvent; dropped?: number }
  /** Understood but nothing to index (e.g. #info); still moves the cursor when it has a seq. */
  | { kind: 'skip'; seq?: number; reason: string }
  /**
   * The source no longer has the events after our cursor (#info OutdatedCursor: older than its
   * replay window) and goes on from the oldest it has: the events between are lost to us.
   */
  | { kind: 'outdated'; message: string }
  | { kind: 'malformed'; seq?: number; reason: string }
  | { kind: 'error'; error: string; message?: string }

export interface FrameOptions {
  /** Verify commit signatures and MST proofs (otherwise the relay is trusted, as the stock does). */
  verify: boolean
  idResolver: IdResolver
  /**
   * Where the fast path gets signing keys (asked-keys.ts: from the writer's lookups); default:
   * `idResolver`. The reference path always asks `idResolver`.
   */
  keyOf?: KeyOf
}

export async function decodeFrame(bytes: Uint8Array, opts: FrameOptions): Promise<FrameResult> {
  // Ordinary commits take the fast path (commit-frame.ts); whatever it does not read exactly is
  // decoded below, the reference way.
  const fast = opts.verify
    ? await verifyCommitFrame(
        bytes,
        opts.keyOf ?? ((did, refresh) => signingKey(opts.idResolver, did, refresh)),
      )
    : decodeCommitFrame(bytes)
  if (fast && 'refused' in fast) return { kind: 'malformed', seq: fast.seq, reason: fast.refused }
  if (fast) return { kind: 'event', event: fast.event, dropped: fast.dropped }
  return decodeFrameReference(bytes, opts)
}

/**
 * The DID's signing key as a did:key, as its document publishes it (signingKeyOf); the resolver
 * keeps documents cached, and `refresh` asks for the document again (a key that was rotated).
 */
async function signingKey(resolver: IdResolver, did: string, refresh: boolean): Promise<string> {
  const doc = await resolver.did.resolve(did, refresh)
  const key = doc && signingKeyOf(doc)
  if (!key) throw new Error(`no signing key for ${did}`)
  return key
}

/** The frame decoded with @atproto's CBOR, CAR and sync parsing (every frame, every mode). */
export async function decodeFrameReference(
  bytes: Uint8Array,
  opts: FrameOptions,
): Promise<FrameResult> {
  let header: unknown
  let body: unknown
  try {
    const parts: unknown[] = [...decodeAll(bytes)]
    if (parts.length !== 2) return { kind: 'malformed', reason: `frame has ${parts.length} parts` }
    ;[header, body] = parts
  } catch (err) {
    return { kind: 'malformed', reason: `undecodable frame: ${(err as Error).message}` }
  }
  if (!isObj(header) || !isObj(body)) return { kind: 'malformed', reason: 'frame is not two maps' }
  if (header.op === -1) {
    return { kind: 'error', error: String(body.error), message: String(body.message ?? '') }
  }
  if (header.op !== 1 || typeof header.t !== 'string') {
    return { kind: 'malformed', reason: 'bad frame header' }
  }
  const seq = isSeq(body.seq) ? body.seq : undefined
  const malformed = (reason: string): FrameResult => ({ kind: 'malformed', seq, reason })
  if (header.t === '#info') {
    if (body.name === 'OutdatedCursor') {
      return { kind: 'outdated', message: typeof body.message === 'string' ? body.message : '' }
    }
    return { kind: 'skip', reason: `info: ${String(body.name)}` }
  }
  if (seq === undefined) return malformed(`${header.t} without a valid seq`)
  const did = header.t === '#commit' ? body.repo : body.did
  if (!isDid(did)) return malformed(`${header.t} with a bad did`)
  if (!isTime(body.time)) return malformed(`${header.t} with a bad time`)
  const time = body.time
  try {
    switch (header.t) {
      case '#commit':
        return await commit(body, seq, did, time, opts)
      case '#sync': {
        const evt = await parseSync(body as never)
        if (!evt) return { kind: 'skip', seq, reason: 'sync without a commit' }
        return {
          kind: 'event',
          event: { type: 'sync', seq, time, did, commit: evt.cid.toString(), rev: evt.rev },
        }
      }
      case '#identity':
        return { kind: 'event', event: { type: 'identity', seq, time, did } }
      case '#account': {
        if (typeof body.active !== 'boolean') return malformed('#account without active')
        const evt = parseAccount({
          ...body,
          $type: 'com.atproto.sync.subscribeRepos#account',
        } as never)
        if (!evt) return { kind: 'skip', seq, reason: 'unrecognized account status' }
        const event: IngestEvent = { type: 'account', seq, time, did, active: evt.active }
        if (evt.status) event.status = evt.status
        return { kind: 'event', event }
      }
      default:
        return { kind: 'skip', seq, reason: `unknown message type ${header.t}` }
    }
  } catch (err) {
    return malformed(`${header.t}: ${(err as Error).message}`)
  }
}

async function commit(
  body: Obj,
  seq: number,
  did: string,
  time: string,
  opts: FrameOptions,
): Promise<FrameResult> {
  if (!(body.blocks instanceof Uint8Array)) {
    return { kind: 'malformed', seq, reason: '#commit without blocks' }
  }
  if (!Array.isArray(body.ops) || typeof body.rev !== 'string' || !body.commit) {
    return { kind: 'malformed', seq, reason: '#commit without ops/rev/commit' }
  }
  const msg = { ...body, $type: 'com.atproto.sync.subscribeRepos#commit' } as never
  const parsed = opts.verify
    ? await parseCommitAuthenticated(opts.idResolver, msg)
    : await parseCommitUnauthenticated(msg)
  const ops: CommitOp[] = parsed.map((op) =>
    op.event === 'delete'
      ? { action: 'delete', collection: op.collection, rkey: op.rkey }
      : {
          action: op.event,
          collection: op.collection,
          rkey: op.rkey,
          cid: op.cid.toString(),
          record: op.record,
        },
  )
  return {
    kind: 'event',
    event: {
      type: 'commit',
      seq,
      time,
      did,
      commit: String(body.commit),
      rev: body.rev,
      since: typeof body.since === 'string' ? body.since : null,
      ops,
    },
    dropped: body.ops.length - ops.length,
  }
}
