// Actors: everything the AppView hydrates a profile from in one rpc (actor row, profile and the
// actor's other "self" records, trusted verifications), plus handle → did lookups.
import { Timestamp, type PlainMessage } from '@bufbuild/protobuf'
import { sql, type Kysely } from 'kysely'
import { anyOf, type DatabaseSchema } from '@openplane/db'
import type { ActorInfo, AgeAssuranceStatus, VerificationMeta } from '@openplane/proto'
import type { RouteContext, Routes } from './context.ts'
import { getRecords, type RecordEntry } from './util/records.ts'

type Db = Kysely<DatabaseSchema>
type ActorRow = Awaited<ReturnType<typeof actorRows>>[number]
type VerifiedBy = Record<string, PlainMessage<VerificationMeta>>

interface SelfRecords {
  profile: RecordEntry
  status: RecordEntry
  chat: RecordEntry
  notif: RecordEntry
  germ: RecordEntry
}

/** The collections of SelfRecords, in its order. */
const SELF_COLLECTIONS = [
  'app.bsky.actor.profile',
  'app.bsky.actor.status',
  'chat.bsky.actor.declaration',
  'app.bsky.notification.declaration',
  'com.germnetwork.declaration',
] as const

export default (ctx: RouteContext): Routes => ({
  async getActors(req) {
    const { dids } = req
    if (dids.length === 0) return { actors: [] }
    // The actors' five "self" records in one lookup (a query each cost Postgres more in planning
    // and round trips than in finding the rows): uris grouped by collection, dids in order.
    const uris = SELF_COLLECTIONS.flatMap((collection) =>
      dids.map((did) => `at://${did}/${collection}/self`),
    )
    const [rows, verifiedBy, records] = await Promise.all([
      actorRows(ctx.db, dids),
      trustedVerifications(ctx.db, dids),
      getRecords(ctx.db, uris),
    ])
    const selfRecord = (collection: (typeof SELF_COLLECTIONS)[number], i: number) =>
      records[SELF_COLLECTIONS.indexOf(collection) * dids.length + i]!
    const byDid = new Map(rows.map((row) => [row.did, row]))
    const ageFor = new Set(req.returnAgeAssuranceForDids)
    const actors = dids.map((did, i) =>
      actorInfo(did, byDid.get(did), verifiedBy.get(did) ?? {}, ageFor.has(did), {
        profile: selfRecord('app.bsky.actor.profile', i),
        status: selfRecord('app.bsky.actor.status', i),
        chat: selfRecord('chat.bsky.actor.declaration', i),
        notif: selfRecord('app.bsky.notification.declaration', i),
        germ: selfRecord('com.germnetwork.declaration', i),
      }),
    )
    return { actors }
  },

  // Exact (already normalised) handles only; lookupUnidirectional is not honoured, as in the stock.
  async getDidsByHandles(req) {
    if (req.handles.length === 0) return { dids: [] }
    const rows = await ctx.db
      .selectFrom('actor')
      .where('handle', '=', anyOf([...new Set(req.handles)]))
      .select(['did', 'handle'])
      .execute()
    const byHandle = new Map(rows.map((row) => [row.handle, row.did]))
    return { dids: req.handles.map((handle) => byHandle.get(handle) ?? '') }
  },
})

function actorRows(db: Db, dids: string[]) {
  return db
    .selectFrom('actor')
    .leftJoin('actor_state', 'actor_state.did', 'actor.did')
    .where('actor.did', '=', anyOf([...new Set(dids)]))
    .select([
      'actor.did',
      'actor.handle',
      'actor.takedownRef',
      'actor.upstreamStatus',
      'actor.trustedVerifier',
      'actor.ageAssuranceStatus',
      'actor.ageAssuranceAccess',
      'actor.ageAssuranceLastInitiatedAt',
      'actor_state.priorityNotifs',
      sql<boolean>`exists (select 1 from labeler where labeler.creator = actor.did)`.as(
        'isLabeler',
      ),
    ])
    .execute()
}

// Verifications of the subjects by trusted verifiers, keyed by verifier did per subject.
async function trustedVerifications(db: Db, dids: string[]): Promise<Map<string, VerifiedBy>> {
  const rows = await db
    .selectFrom('verification')
    .innerJoin('actor', 'actor.did', 'verification.creator')
    .where('verification.subject', '=', anyOf([...new Set(dids)]))
    .where('actor.trustedVerifier', '=', true)
    .select([
      'verification.subject',
      'verification.creator',
      'verification.rkey',
      'verification.handle',
      'verification.displayName',
      'verification.sortedAt',
    ])
    .orderBy('verification.sortedAt', 'asc')
    .execute()
  const bySubject = new Map<string, VerifiedBy>()
  for (const row of rows) {
    const verifiedBy = bySubject.get(row.subject) ?? {}
    verifiedBy[row.creator] = {
      rkey: row.rkey,
      handle: row.handle,
      displayName: row.displayName,
      sortedAt: Timestamp.fromDate(new Date(row.sortedAt)),
    }
    bySubject.set(row.subject, verifiedBy)
  }
  return bySubject
}

function actorInfo(
  did: string,
  row: ActorRow | undefined,
  verifiedBy: VerifiedBy,
  withAgeAssurance: boolean,
  records: SelfRecords,
): Partial<PlainMessage<ActorInfo>> {
  const chat = declaration(records.chat, 'chat.bsky.actor.declaration')
  return {
    exists: !!row,
    handle: row?.handle ?? '',
    profile: records.profile,
    takenDown: !!row?.takedownRef,
    takedownRef: row?.takedownRef || '',
    labeler: row?.isLabeler ?? false,
    allowIncomingChatsFrom: stringField(chat, 'allowIncoming'),
    allowGroupChatInvitesFrom: stringField(chat, 'allowGroupInvites'),
    upstreamStatus: row?.upstreamStatus ?? '',
    // The profile's own claim; not trustworthy, but it is what the stock reports.
    createdAt: records.profile.createdAt,
    priorityNotifications: row?.priorityNotifs ?? false,
    trustedVerifier: row?.trustedVerifier ?? false,
    verifiedBy,
    statusRecord: records.status,
    germRecord: records.germ,
    tags: [],
    profileTags: records.profile.tags,
    allowActivitySubscriptionsFrom: activitySubscriptionsFrom(records.notif),
    ageAssuranceStatus: withAgeAssurance ? ageAssurance(row) : undefined,
  }
}

// The lexicon's default: no (valid) declaration record means "followers".
function activitySubscriptionsFrom(notif: RecordEntry): string {
  const value = stringField(
    declaration(notif, 'app.bsky.notification.declaration'),
    'allowSubscriptions',
  )
  return value === 'mutuals' || value === 'none' ? value : 'followers'
}

function ageAssurance(row: ActorRow | undefined): PlainMessage<AgeAssuranceStatus> {
  const status = row?.ageAssuranceStatus ?? 'unknown'
  let access = row?.ageAssuranceAccess
  if (!access || access === 'unknown') {
    access = status === 'assured' ? 'full' : status === 'blocked' ? 'none' : 'unknown'
  }
  const lastInitiatedAt = row?.ageAssuranceLastInitiatedAt
  return {
    status,
    access,
    lastInitiatedAt: lastInitiatedAt ? Timestamp.fromDate(new Date(lastInitiatedAt)) : undefined,
    overrideApplied: false,
  }
}

type Declaration = { [key: string]: unknown }

/**
 * The record's fields if it validates as a declaration of `type` (an object carrying that $type
 * whose fields are all strings where present), else undefined, mirroring the AppView-side
 * lexicon check the stock applies: a record that fails it counts as absent.
 */
function declaration(entry: RecordEntry, type: string): Declaration | undefined {
  if (!entry.record.byteLength) return undefined
  let value: unknown
  try {
    value = JSON.parse(Buffer.from(entry.record).toString('utf8'))
  } catch {
    return undefined
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return undefined
  const decl = value as Declaration
  if (decl.$type !== type) return undefined
  const fields = DECLARATION_FIELDS[type] ?? { required: [], optional: [] }
  if (!fields.required.every((k) => typeof decl[k] === 'string')) return undefined
  if (!fields.optional.every((k) => decl[k] === undefined || typeof decl[k] === 'string')) {
    return undefined
  }
  return decl
}

const DECLARATION_FIELDS: Record<string, { required: string[]; optional: string[] }> = {
  'chat.bsky.actor.declaration': { required: ['allowIncoming'], optional: ['allowGroupInvites'] },
  'app.bsky.notification.declaration': { required: ['allowSubscriptions'], optional: [] },
}

function stringField(decl: Declaration | undefined, key: string): string {
  const value = decl?.[key]
  return typeof value === 'string' ? value : ''
}
