import { Code, ConnectError } from '@connectrpc/connect'
import type { RouteContext, Routes } from './context.ts'

/** The ref recorded when a takedown names none. */
const DEFAULT_REF = 'TAKEDOWN'
const UNIQUE_VIOLATION = '23505'

// Takedown state as the AppView reads it: a ref on the actor or record row, or a blob_takedown
// row. Writes to actors or records the index does not hold change nothing, as in the stock.
export default (ctx: RouteContext): Routes => ({
  async getActorTakedown(req) {
    const row = await ctx.db
      .selectFrom('actor')
      .where('did', '=', req.did)
      .select('takedownRef')
      .executeTakeFirst()
    return { takenDown: !!row?.takedownRef, takedownRef: row?.takedownRef ?? '' }
  },

  // A blob_takedown row is a takedown even with an empty ref.
  async getBlobTakedown(req) {
    const row = await ctx.db
      .selectFrom('blob_takedown')
      .where('did', '=', req.did)
      .where('cid', '=', req.cid)
      .select('takedownRef')
      .executeTakeFirst()
    return { takenDown: !!row, takedownRef: row?.takedownRef ?? '' }
  },

  async getRecordTakedown(req) {
    const row = await ctx.db
      .selectFrom('record')
      .where('uri', '=', req.recordUri)
      .select('takedownRef')
      .executeTakeFirst()
    return { takenDown: !!row?.takedownRef, takedownRef: row?.takedownRef ?? '' }
  },

  async takedownActor(req) {
    await ctx.db
      .updateTable('actor')
      .set({ takedownRef: req.ref || DEFAULT_REF })
      .where('did', '=', req.did)
      .execute()
    return {}
  },

  // Like the stock, taking down a blob twice is an error (it does not replace the ref).
  async takedownBlob(req) {
    try {
      await ctx.db
        .insertInto('blob_takedown')
        .values({ did: req.did, cid: req.cid, takedownRef: req.ref || DEFAULT_REF })
        .execute()
    } catch (err) {
      if (isUniqueViolation(err)) {
        throw new ConnectError('blob is already taken down', Code.AlreadyExists)
      }
      throw err
    }
    return {}
  },

  async takedownRecord(req) {
    await ctx.db
      .updateTable('record')
      .set({ takedownRef: req.ref || DEFAULT_REF })
      .where('uri', '=', req.recordUri)
      .execute()
    return {}
  },

  async untakedownActor(req) {
    await ctx.db
      .updateTable('actor')
      .set({ takedownRef: null })
      .where('did', '=', req.did)
      .execute()
    return {}
  },

  async untakedownBlob(req) {
    await ctx.db
      .deleteFrom('blob_takedown')
      .where('did', '=', req.did)
      .where('cid', '=', req.cid)
      .execute()
    return {}
  },

  async untakedownRecord(req) {
    await ctx.db
      .updateTable('record')
      .set({ takedownRef: null })
      .where('uri', '=', req.recordUri)
      .execute()
    return {}
  },

  // Stored as given (an empty status included); `active` is not recorded, as in the stock.
  async updateActorUpstreamStatus(req) {
    await ctx.db
      .updateTable('actor')
      .set({ upstreamStatus: req.upstreamStatus })
      .where('did', '=', req.actorDid)
      .execute()
    return {}
  },
})

function isUniqueViolation(err: unknown): boolean {
  return typeof err === 'object' && err !== null && 'code' in err && err.code === UNIQUE_VIOLATION
}
