import { sql } from 'kysely'
import type { RouteContext, Routes } from './context.ts'

// The AppView's health check calls Ping; answer only when Postgres answers.
export default (ctx: RouteContext): Routes => ({
  async ping() {
    await sql`select 1`.execute(ctx.db)
    return {}
  },
})
