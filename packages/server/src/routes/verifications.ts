// Verifications: only the records rpc. GetVerificationsIssued/Received stay unimplemented, as in
// the stock dataplane (the AppView reads verifications through GetActors' verifiedBy instead).
import type { RouteContext, Routes } from './context.ts'
import { recordsOf } from './util/records.ts'

export default (ctx: RouteContext): Routes => ({
  getVerificationRecords: recordsOf(ctx.db, 'app.bsky.graph.verification'),
})
