// Jetstream messages (@openplane/jetstream) → IngestEvents. Jetstream is trusted, as a relay is
// in trusted mode: it carries no commit blocks to verify, and no commit CID (the commit events
// here have an empty one). Its cursor, `time_us`, is the time Jetstream saw the event, in
// microseconds: it is the events' seq and, in milliseconds, their time. Each op is its own
// commit event (with its commit's rev).
import { jsonToLex, type JsonObject } from '@atproto/lex-json'
import { messageText } from '@openplane/jetstream'
import type { CommitOp, IngestEvent } from './events.ts'
import type { FrameResult } from './frames.ts'

type Obj = Record<string, unknown>
const isObj = (v: unknown): v is Obj => !!v && typeof v === 'object' && !Array.isArray(v)
const isDid = (v: unknown): v is string =>
  typeof v === 'string' && /^did:[a-z]+:[a-zA-Z0-9._:%-]{1,2048}$/.test(v)
const OPERATIONS = new Set(['create', 'update', 'delete'])

/** One message as received (compressed or not) → what the indexer takes. */
export function decodeJetstream(bytes: Uint8Array): FrameResult {
  let text: string
  try {
    text = messageText(bytes)
  } catch (err) {
    return { kind: 'malformed', reason: `undecompressable message: ${(err as Error).message}` }
  }
  let msg: unknown
  try {
    msg = JSON.parse(text)
  } catch (err) {
    return { kind: 'malformed', reason: `not JSON: ${(err as Error).message}` }
  }
  if (!isObj(msg)) return { kind: 'malformed', reason: 'not a JSON object' }
  const seq = msg.time_us
  if (typeof seq !== 'number' || !Number.isSafeInteger(seq) || seq < 0) {
    return { kind: 'malformed', reason: 'no time_us' }
  }
  const did = msg.did
  if (!isDid(did)) return { kind: 'malformed', seq, reason: 'no did' }
  const time = new Date(Math.floor(seq / 1000)).toISOString()
  const base = { seq, time, did }
  switch (msg.kind) {
    case 'commit':
      return commit(msg.commit, base)
    case 'identity':
      return { kind: 'event', event: { type: 'identity', ...base } }
    case 'account': {
      const account = msg.account
      if (!isObj(account) || typeof account.active !== 'boolean') {
        return { kind: 'malformed', seq, reason: 'account without active' }
      }
      const event: IngestEvent = { type: 'account', ...base, active: account.active }
      if (typeof account.status === 'string') event.status = account.status
      return { kind: 'event', event }
    }
    default:
      return { kind: 'skip', seq, reason: `unknown kind ${String(msg.kind)}` }
  }
}

const STRICT = { strict: true } as const

function commit(value: unknown, base: { seq: number; time: string; did: string }): FrameResult {
  const { seq } = base
  if (!isObj(value)) return { kind: 'malformed', seq, reason: 'commit without a body' }
  const { rev, operation, collection, rkey, record, cid } = value
  if (typeof rev !== 'string' || typeof operation !== 'string' || !OPERATIONS.has(operation)) {
    return { kind: 'malformed', seq, reason: 'commit without rev or operation' }
  }
  if (typeof collection !== 'string' || typeof rkey !== 'string') {
    return { kind: 'malformed', seq, reason: 'commit without collection or rkey' }
  }
  let op: CommitOp
  if (operation === 'delete') op = { action: 'delete', collection, rkey }
  else {
    if (typeof cid !== 'string' || !isObj(record)) {
      return { kind: 'malformed', seq, reason: `${operation} without record or cid` }
    }
    const action = operation as 'create' | 'update'
    try {
      // Strict: the data model's JSON rules (integers only, well-formed $link, $bytes and blob
      // objects, a non-empty string $type); a record made by another implementation that breaks
      // them is an invalid record, counted and skipped like one the lexicon refuses.
      op = { action, collection, rkey, cid, record: jsonToLex(record as JsonObject, STRICT) }
    } catch (err) {
      const invalid = `record is not valid data-model JSON: ${(err as Error).message}`
      op = { action, collection, rkey, cid, checked: { invalid } }
    }
  }
  return { kind: 'event', event: { type: 'commit', ...base, commit: '', rev, ops: [op] } }
}
