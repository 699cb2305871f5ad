// The stock `follow` table as a stream of (creator, subject) pages: keyset pagination on its unique
// (creator, "subjectDid") index, so memory stays at one page and no page costs more than the last.
import type { Db } from '@openplane/db'
import { sql } from 'kysely'

export interface FollowPair {
  creator: string
  subjectDid: string
}

export async function* followPages(db: Db, pageSize: number): AsyncGenerator<FollowPair[]> {
  let after: FollowPair | undefined
  for (;;) {
    let query = db.db
      .selectFrom('follow')
      .select(['creator', 'subjectDid'])
      .orderBy('creator')
      .orderBy('subjectDid')
      .limit(pageSize)
    if (after) {
      query = query.where(
        sql<boolean>`(creator, "subjectDid") > (${after.creator}, ${after.subjectDid})`,
      )
    }
    const rows = await query.execute()
    if (rows.length > 0) yield rows
    if (rows.length < pageSize) return
    after = rows.at(-1)
  }
}
