// The corpus as Jetstream serves it (@openplane/jetstream's wire format): each firehose frame
// becomes one JSON message per record op, identity and account frames one message each, #sync
// and empty commits none. A message's `time_us` is its frame's time in microseconds plus its
// place among the frames of the same millisecond (the corpus's times have millisecond
// precision), so cursors are unique, increase with the stream, and map back to a frame.
import { decode } from '@atcute/cbor'
import type { JetstreamMessage } from '@openplane/jetstream'
import type { CorpusReader } from './file.ts'
import { bytesOf, carBlocks, linkText, readFrame, type Obj } from './frame-read.ts'

/** Frames of one millisecond beyond this share its last microsecond (far above any rate here). */
const PER_MS = 1000

export class JetstreamView {
  private readonly corpus: CorpusReader

  constructor(corpus: CorpusReader) {
    this.corpus = corpus
  }

  /** The cursor (time_us) of frame `i`'s messages. */
  timeUs(i: number): number {
    const ms = this.corpus.timeAt(i)
    return ms * 1000 + Math.min(PER_MS - 1, i - this.firstAt(ms))
  }

  /** The first frame whose messages are at or after `cursor` (Jetstream resumes inclusively). */
  indexFrom(cursor: number): number {
    const ms = Math.floor(cursor / 1000)
    const first = this.firstAt(ms)
    if (first >= this.corpus.frames || this.corpus.timeAt(first) !== ms) return first
    return Math.min(first + (cursor % 1000), this.firstAt(ms + 1))
  }

  /** Index of the first frame at or after `ms`. */
  private firstAt(ms: number): number {
    let lo = 0
    let hi = this.corpus.frames
    while (lo < hi) {
      const mid = (lo + hi) >>> 1
      if (this.corpus.timeAt(mid) < ms) lo = mid + 1
      else hi = mid
    }
    return lo
  }

  /** Frame `i`'s messages (its payload bytes, without the WebSocket header). */
  async messages(i: number, payload: Uint8Array): Promise<JetstreamMessage[]> {
    const frame = readFrame(payload)
    if (!frame) return []
    const { body, t } = frame
    const time_us = this.timeUs(i)
    const seq = body.seq as number
    const time = body.time as string
    if (t === '#identity') {
      const did = body.did as string
      const identity = { did, seq, time, ...(body.handle ? { handle: body.handle as string } : {}) }
      return [{ did, time_us, kind: 'identity', identity }]
    }
    if (t === '#account') {
      const did = body.did as string
      const account = {
        active: body.active as boolean,
        did,
        seq,
        time,
        ...(body.status ? { status: body.status as string } : {}),
      }
      return [{ did, time_us, kind: 'account', account }]
    }
    if (t !== '#commit') return []
    return this.commit(body, time_us)
  }

  private async commit(body: Obj, time_us: number): Promise<JetstreamMessage[]> {
    const did = body.repo as string
    const rev = body.rev as string
    const ops = body.ops as { action: string; path: string; cid: unknown }[]
    if (!ops.length) return []
    const blocks = carBlocks(bytesOf(body.blocks))
    const out: JetstreamMessage[] = []
    for (const op of ops) {
      const slash = op.path.indexOf('/')
      const collection = op.path.slice(0, slash)
      const rkey = op.path.slice(slash + 1)
      const cid = linkText(op.cid)
      if (op.action === 'delete' || !cid) {
        out.push({
          did,
          time_us,
          kind: 'commit',
          commit: { rev, operation: 'delete', collection, rkey },
        })
        continue
      }
      const bytes = blocks.get(cid)
      // A record the CAR lacks is left out, as Jetstream leaves out what it cannot read.
      if (!bytes) continue
      // As JSON: links as {$link}, bytes as {$bytes} (the wrappers' own toJSON).
      const record = JSON.parse(JSON.stringify(decode(bytes))) as Obj
      const operation = op.action === 'update' ? 'update' : 'create'
      out.push({
        did,
        time_us,
        kind: 'commit',
        commit: { rev, operation, collection, rkey, record, cid },
      })
    }
    return out
  }
}

/** Whether a commit's collection passes a `wantedCollections` filter (NSIDs or `prefix.*`). */
export function wantedBy(wanted: string[], collection: string): boolean {
  if (!wanted.length) return true
  return wanted.some((w) =>
    w.endsWith('.*') ? collection.startsWith(w.slice(0, -1)) : collection === w,
  )
}
