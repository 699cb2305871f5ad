import type { ServiceImpl } from '@connectrpc/connect'
import type { Kysely } from 'kysely'
import type { DatabaseSchema } from '@openplane/db'
import type { Identity } from '@openplane/identity'
import type { Service } from '@openplane/proto'

export interface RouteContext {
  db: Kysely<DatabaseSchema>
  identity: Identity
}

export type Routes = Partial<ServiceImpl<typeof Service>>
