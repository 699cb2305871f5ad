// bsync's operations, checked and turned into what they mean for the index. An operation that
// does not parse (a bad DID or URI, an unknown method or namespace, a payload that is not the
// namespace's shape) becomes a skip with its reason: counted and logged by the consumer, never
// applied in part, never a stall of the stream.
import { ensureValidAtUri, ensureValidDid } from '@atproto/syntax'
import {
  Method,
  MuteOperation_Type,
  type MuteOperation,
  type NotifOperation,
  type Operation,
} from '@openplane/proto/bsync'

/** The namespaces the AppView stashes through bsync (its `Namespaces`), by what we index of them. */
export const NAMESPACES = {
  ageAssuranceV2: 'app.bsky.ageassurance.defs#event',
  bookmark: 'app.bsky.bookmark.defs#bookmark',
  contactNotification: 'app.bsky.contact.defs#notification',
  draft: 'app.bsky.draft.defs#draftWithId',
  notificationPreferences: 'app.bsky.notification.defs#preferences',
  activitySubscription: 'app.bsky.notification.defs#subjectActivitySubscription',
  ageAssurance: 'app.bsky.unspecced.defs#ageAssuranceEvent',
} as const
const KNOWN_NAMESPACES = new Set<string>(Object.values(NAMESPACES))

export class Skip extends Error {}

const LIST_COLLECTION = 'app.bsky.graph.list'

export type MuteChange =
  | {
      kind: 'add'
      table: 'mute'
      actor: string
      subject: string
      onlyReposts: boolean
      onlyQuoteposts: boolean
    }
  | { kind: 'add' | 'remove'; table: 'list_mute' | 'thread_mute'; actor: string; subject: string }
  | { kind: 'remove'; table: 'mute'; actor: string; subject: string }
  | { kind: 'clear'; actor: string }

function did(value: string, what: string): string {
  try {
    ensureValidDid(value)
  } catch {
    throw new Skip(`${what} is not a valid DID`)
  }
  return value
}

function atUri(value: string, what: string): string {
  try {
    ensureValidAtUri(value)
  } catch {
    throw new Skip(`${what} is not a valid AT URI`)
  }
  return value
}

/** A mute operation: a DID subject is an account mute, a list URI a list mute, any other URI a thread mute (as the stock reads them). */
export function muteChange(op: MuteOperation): MuteChange {
  const actor = did(op.actorDid, 'actor')
  if (op.type === MuteOperation_Type.CLEAR) return { kind: 'clear', actor }
  const kind =
    op.type === MuteOperation_Type.ADD
      ? 'add'
      : op.type === MuteOperation_Type.REMOVE
        ? 'remove'
        : undefined
  if (!kind) throw new Skip(`unknown mute operation type ${op.type}`)
  if (op.subject.startsWith('did:')) {
    const subject = did(op.subject, 'subject')
    return kind === 'add'
      ? {
          kind,
          table: 'mute',
          actor,
          subject,
          onlyReposts: op.onlyReposts,
          onlyQuoteposts: op.onlyQuoteposts,
        }
      : { kind, table: 'mute', actor, subject }
  }
  const subject = atUri(op.subject, 'subject')
  const collection = subject.split('/')[3]
  return {
    kind,
    table: collection === LIST_COLLECTION ? 'list_mute' : 'thread_mute',
    actor,
    subject,
  }
}

/** A notification operation: the actor's priority-notifications setting, if it carries one. */
export function notifChange(op: NotifOperation): { actor: string; priority: boolean } | undefined {
  const actor = did(op.actorDid, 'actor')
  return op.priority === undefined ? undefined : { actor, priority: op.priority }
}

export type Put = { method: 'create' | 'update'; payload: string } | { method: 'delete' }

/** What a private-data operation means for the namespace's own table, beside private_data. */
export type Indexed =
  | { ns: 'bookmark'; put: 'create'; subjectUri: string; subjectCid: string }
  | { ns: 'bookmark'; put: 'update' | 'delete' }
  | {
      ns: 'activitySubscription'
      put: 'create' | 'update'
      subjectDid: string
      post: boolean
      reply: boolean
    }
  | { ns: 'activitySubscription'; put: 'delete' }
  | { ns: 'draft'; put: 'create' | 'update'; payload: string }
  | { ns: 'draft'; put: 'delete' }
  | { ns: 'ageAssurance'; patch: AgePatch }
  | undefined

export interface AgePatch {
  ageAssuranceStatus?: string
  ageAssuranceLastInitiatedAt?: string
  ageAssuranceAccess?: string
  ageAssuranceCountryCode?: string
  ageAssuranceRegionCode?: string
}

export interface PrivateOp {
  actor: string
  namespace: string
  key: string
  put: Put
  indexed: Indexed
}

/** A private-data operation, with what its namespace's table needs from its payload. */
export function privateOp(op: Operation): PrivateOp {
  const actor = did(op.actorDid, 'actor')
  if (!KNOWN_NAMESPACES.has(op.namespace)) throw new Skip(`unknown namespace ${op.namespace}`)
  if (!op.key) throw new Skip('empty key')
  // Postgres text cannot hold NUL; such an operation could never be stored.
  if (op.key.includes('\u0000')) throw new Skip('NUL in key')
  const method =
    op.method === Method.CREATE
      ? 'create'
      : op.method === Method.UPDATE
        ? 'update'
        : op.method === Method.DELETE
          ? 'delete'
          : undefined
  if (!method) throw new Skip(`unknown method ${op.method}`)
  if (method === 'delete') {
    return {
      actor,
      namespace: op.namespace,
      key: op.key,
      put: { method },
      indexed: indexedDelete(op.namespace),
    }
  }
  const payload = Buffer.from(op.payload).toString('utf8')
  if (payload.includes('\u0000')) throw new Skip('NUL in payload')
  let json: unknown
  try {
    json = JSON.parse(payload)
  } catch {
    throw new Skip('payload is not JSON')
  }
  if (!isObject(json)) throw new Skip('payload is not an object')
  return {
    actor,
    namespace: op.namespace,
    key: op.key,
    put: { method, payload },
    indexed: indexedPut(op.namespace, method, json, payload),
  }
}

function indexedDelete(namespace: string): Indexed {
  if (namespace === NAMESPACES.bookmark) return { ns: 'bookmark', put: 'delete' }
  if (namespace === NAMESPACES.activitySubscription)
    return { ns: 'activitySubscription', put: 'delete' }
  if (namespace === NAMESPACES.draft) return { ns: 'draft', put: 'delete' }
  return undefined
}

function indexedPut(
  namespace: string,
  put: 'create' | 'update',
  json: Record<string, unknown>,
  payload: string,
): Indexed {
  switch (namespace) {
    case NAMESPACES.bookmark: {
      if (put === 'update') return { ns: 'bookmark', put }
      const subject = json.subject
      if (
        !isObject(subject) ||
        typeof subject.uri !== 'string' ||
        typeof subject.cid !== 'string'
      ) {
        throw new Skip('bookmark without a subject uri and cid')
      }
      return {
        ns: 'bookmark',
        put,
        subjectUri: atUri(subject.uri, 'bookmark subject'),
        subjectCid: subject.cid,
      }
    }
    case NAMESPACES.activitySubscription: {
      const sub = json.activitySubscription
      if (
        typeof json.subject !== 'string' ||
        !isObject(sub) ||
        typeof sub.post !== 'boolean' ||
        typeof sub.reply !== 'boolean'
      ) {
        throw new Skip('activity subscription without a subject and post/reply flags')
      }
      return {
        ns: 'activitySubscription',
        put,
        subjectDid: did(json.subject, 'subscription subject'),
        post: sub.post,
        reply: sub.reply,
      }
    }
    case NAMESPACES.draft:
      return { ns: 'draft', put, payload }
    case NAMESPACES.ageAssurance:
    case NAMESPACES.ageAssuranceV2:
      // Only a new event moves the actor's state (the stock ignores updates of one).
      return put === 'create' ? { ns: 'ageAssurance', patch: agePatch(namespace, json) } : undefined
    default:
      return undefined
  }
}

function agePatch(namespace: string, json: Record<string, unknown>): AgePatch {
  const { status, createdAt } = json
  if (typeof status !== 'string' || typeof createdAt !== 'string') {
    throw new Skip('age assurance event without a status and createdAt')
  }
  const patch: AgePatch = { ageAssuranceStatus: status }
  if (status === 'pending') patch.ageAssuranceLastInitiatedAt = createdAt
  if (namespace === NAMESPACES.ageAssuranceV2) {
    for (const [field, column] of [
      ['access', 'ageAssuranceAccess'],
      ['countryCode', 'ageAssuranceCountryCode'],
      ['regionCode', 'ageAssuranceRegionCode'],
    ] as const) {
      const v = json[field]
      if (v === undefined) continue
      if (typeof v !== 'string') throw new Skip(`age assurance ${field} is not a string`)
      patch[column] = v
    }
  }
  return patch
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}
