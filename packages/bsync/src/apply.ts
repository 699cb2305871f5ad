// Reading what a page's fold must know, and writing its plan: each table once per kind of change
// (one delete, one upsert), in the transaction that also moves the stream's cursor.
import { sql, type Kysely, type Transaction } from 'kysely'
import type { DatabaseSchema } from '@openplane/db'
import type { PrivateOp } from './ops.ts'
import type { Loaded, MutePlan, OperationPlan, PriorityRow, Upserts } from './plan.ts'

type Db = Kysely<DatabaseSchema>
type Tx = Transaction<DatabaseSchema>

/** Rows an operation page's inserts could collide with: by primary key and by other unique keys. */
export async function loadForOperations(db: Db | Tx, ops: PrivateOp[]): Promise<Loaded> {
  const creators: string[] = []
  const keys: string[] = []
  const subjectUris: string[] = []
  const subjectDids: string[] = []
  const uriCreators: string[] = []
  const didCreators: string[] = []
  const draftCreators: string[] = []
  const draftKeys: string[] = []
  for (const op of ops) {
    const ix = op.indexed
    if (!ix || ix.ns === 'ageAssurance') continue
    if (ix.ns === 'draft') {
      draftCreators.push(op.actor)
      draftKeys.push(op.key)
      continue
    }
    creators.push(op.actor)
    keys.push(op.key)
    if (ix.ns === 'bookmark' && ix.put === 'create') {
      subjectUris.push(ix.subjectUri)
      uriCreators.push(op.actor)
    }
    if (ix.ns === 'activitySubscription' && ix.put !== 'delete') {
      subjectDids.push(ix.subjectDid)
      didCreators.push(op.actor)
    }
  }
  const inPairs = (cols: [string, string], a: string[], b: string[]) =>
    sql`(${sql.ref(cols[0])}, ${sql.ref(cols[1])}) in (select * from unnest(${a}::text[], ${b}::text[]))`
  const [bookmark, activitySubscription, draft] = await Promise.all([
    creators.length
      ? db
          .selectFrom('bookmark')
          .selectAll()
          .where(
            sql<boolean>`${inPairs(['creator', 'key'], creators, keys)} or ${inPairs(['subjectUri', 'creator'], subjectUris, uriCreators)}`,
          )
          .execute()
      : [],
    creators.length
      ? db
          .selectFrom('activity_subscription')
          .selectAll()
          .where(
            sql<boolean>`${inPairs(['creator', 'key'], creators, keys)} or ${inPairs(['creator', 'subjectDid'], didCreators, subjectDids)}`,
          )
          .execute()
      : [],
    draftCreators.length
      ? db
          .selectFrom('draft')
          .selectAll()
          .where(sql<boolean>`${inPairs(['creator', 'key'], draftCreators, draftKeys)}`)
          .execute()
      : [],
  ])
  return { bookmark, activitySubscription, draft }
}

/** Deletes, per (a, b) key pair, the rows of `table`. */
async function deletePairs(
  tx: Tx,
  table: string,
  cols: [string, string],
  pairs: [string, string][],
): Promise<void> {
  if (!pairs.length) return
  await sql`
    delete from ${sql.table(table)}
    where (${sql.ref(cols[0])}, ${sql.ref(cols[1])}) in (
      select * from unnest(${pairs.map((p) => p[0])}::text[], ${pairs.map((p) => p[1])}::text[])
    )
  `.execute(tx)
}

const split = (k: string) => k.split('\u0000') as [string, string]

/** Deletes of removed keys, then the puts (inserted, or some columns updated in place). */
async function applyUpserts<R extends object>(
  tx: Tx,
  table: 'mute' | 'list_mute' | 'thread_mute' | 'private_data',
  upserts: Upserts<R>,
  keyCols: string[],
  deleteKey: (key: string) => [string, string],
  update: (keyof R & string)[],
): Promise<void> {
  await deletePairs(tx, table, [keyCols[0]!, keyCols[1]!], [...upserts.removed].map(deleteKey))
  const rows = [...upserts.rows.values()]
  if (!rows.length) return
  await tx
    .insertInto(table)
    .values(rows as never)
    .onConflict((oc) => {
      const c = oc.columns(keyCols as never)
      if (!update.length) return c.doNothing()
      return c.doUpdateSet(
        Object.fromEntries(update.map((col) => [col, sql.ref(`excluded.${col}`)])) as never,
      )
    })
    .execute()
}

export async function applyMutes(tx: Tx, plan: MutePlan): Promise<void> {
  if (plan.cleared.size) {
    const actors = [...plan.cleared]
    await tx.deleteFrom('mute').where('mutedByDid', 'in', actors).execute()
    await tx.deleteFrom('list_mute').where('mutedByDid', 'in', actors).execute()
  }
  await applyUpserts(tx, 'mute', plan.mute, ['mutedByDid', 'subjectDid'], split, [
    'onlyReposts',
    'onlyQuoteposts',
  ])
  await applyUpserts(tx, 'list_mute', plan.listMute, ['mutedByDid', 'listUri'], split, [])
  await applyUpserts(tx, 'thread_mute', plan.threadMute, ['mutedByDid', 'rootUri'], split, [])
}

export async function applyNotifs(tx: Tx, rows: Map<string, PriorityRow>): Promise<void> {
  if (!rows.size) return
  await tx
    .insertInto('actor_state')
    .values([...rows.values()])
    .onConflict((oc) =>
      oc.column('did').doUpdateSet({ priorityNotifs: sql.ref('excluded.priorityNotifs') as never }),
    )
    .execute()
}

export async function applyOperations(tx: Tx, plan: OperationPlan): Promise<void> {
  // private_data's key is three columns: delete by (actor, namespace\0key) pairs split back.
  const removed = [...plan.privateData.removed].map(
    (k) => k.split('\u0000') as [string, string, string],
  )
  if (removed.length) {
    await sql`
      delete from private_data where ("actorDid", namespace, key) in (
        select * from unnest(${removed.map((r) => r[0])}::text[], ${removed.map((r) => r[1])}::text[], ${removed.map((r) => r[2])}::text[])
      )
    `.execute(tx)
  }
  const puts = [...plan.privateData.rows.values()]
  if (puts.length) {
    await tx
      .insertInto('private_data')
      .values(puts)
      .onConflict((oc) =>
        oc.columns(['actorDid', 'namespace', 'key']).doUpdateSet({
          payload: sql.ref('excluded.payload') as never,
          updatedAt: sql.ref('excluded.updatedAt') as never,
        }),
      )
      .execute()
  }
  await applyFold(tx, 'bookmark', plan.bookmark.changes(), [
    'subjectUri',
    'subjectCid',
    'indexedAt',
  ])
  await applyFold(tx, 'activity_subscription', plan.activitySubscription.changes(), [
    'subjectDid',
    'indexedAt',
    'post',
    'reply',
  ])
  await applyFold(tx, 'draft', plan.draft.changes(), ['createdAt', 'updatedAt', 'payload'])
  if (plan.bookmarked.size) {
    // Recounted from the rows, as the stock does, in the same transaction.
    await sql`
      insert into post_agg (uri, "bookmarkCount")
      select u.uri, (select count(*) from bookmark b where b."subjectUri" = u.uri)
      from unnest(${[...plan.bookmarked]}::text[]) as u(uri)
      on conflict (uri) do update set "bookmarkCount" = excluded."bookmarkCount"
    `.execute(tx)
  }
  await applyAgeAssurance(tx, plan.ageAssurance)
}

async function applyFold<R extends { creator: string; key: string }>(
  tx: Tx,
  table: 'bookmark' | 'activity_subscription' | 'draft',
  changes: { deletes: R[]; upserts: R[] },
  columns: string[],
): Promise<void> {
  await deletePairs(
    tx,
    table,
    ['creator', 'key'],
    changes.deletes.map((r) => [r.creator, r.key]),
  )
  if (!changes.upserts.length) return
  await tx
    .insertInto(table)
    .values(changes.upserts as never)
    .onConflict((oc) =>
      oc
        .columns(['creator', 'key'] as never)
        .doUpdateSet(
          Object.fromEntries(columns.map((c) => [c, sql.ref(`excluded.${c}`)])) as never,
        ),
    )
    .execute()
}

const AGE_COLUMNS = [
  'ageAssuranceStatus',
  'ageAssuranceLastInitiatedAt',
  'ageAssuranceAccess',
  'ageAssuranceCountryCode',
  'ageAssuranceRegionCode',
] as const

/** One update of the actor rows: each column set where the page set it, kept where not. */
async function applyAgeAssurance(
  tx: Tx,
  patches: Map<string, Partial<Record<(typeof AGE_COLUMNS)[number], string>>>,
) {
  if (!patches.size) return
  const dids = [...patches.keys()]
  const list = [...patches.values()]
  const sets = AGE_COLUMNS.map(
    (c, i) =>
      sql`${sql.ref(c)} = case when v.${sql.ref(`s${i}`)} then v.${sql.ref(`v${i}`)} else actor.${sql.ref(c)} end`,
  )
  const arrays = AGE_COLUMNS.flatMap((c) => [
    sql`${list.map((p) => p[c] ?? null)}::text[]`,
    sql`${list.map((p) => p[c] !== undefined)}::bool[]`,
  ])
  const names = AGE_COLUMNS.flatMap((_, i) => [sql.ref(`v${i}`), sql.ref(`s${i}`)])
  await sql`
    update actor set ${sql.join(sets)}
    from unnest(${dids}::text[], ${sql.join(arrays)}) as v(did, ${sql.join(names)})
    where actor.did = v.did
  `.execute(tx)
}
