// What a backfill worker is configured with, its defaults, and the counts it keeps.
import { availableParallelism } from 'node:os'
import type { DidDocument } from '@atproto/identity'
import type { Kysely } from 'kysely'
import type { DatabaseSchema } from '@openplane/db'
import type { IdentityPrefetch, Scope, Writer } from '@openplane/ingest'
import type { RetryPolicy } from './repos.ts'

/** Where a repo's DID document comes from; throws when the DID does not resolve. */
export interface DidDocs {
  ensureResolve(did: string): Promise<DidDocument>
}

export interface BackfillOptions {
  db: Kysely<DatabaseSchema>
  writer: Writer
  /**
   * DID documents, for each repo's PDS and key: the identity resolver's (`idResolver.did`), or
   * the writer's lookup thread, whose cache the writer's handle checks then share.
   */
  didDocs: DidDocs
  /** Check each repo's signature and CIDs (the DID document's key). */
  verify: boolean
  /** Repos in flight at once, over all hosts. */
  concurrency: number
  /** Fetches at once from one PDS host. */
  perHost: number
  /** Fetches of one repo in this run before it is marked failed (transient failures). */
  maxAttempts: number
  /** Also take repos an earlier run marked failed. */
  retryFailed: boolean
  /**
   * CAR bytes held in memory over all repos being read; a repo that does not fit then is read as
   * it streams, its blocks past this size in a temporary file.
   */
  memoryBytes: number
  /** Threads reading and checking CARs beside the writer's (0: on its thread). */
  workers: number
  connectTimeoutMs: number
  idleTimeoutMs: number
  /** Record ops per written event; a repo's events are written a few at a time. */
  opsPerEvent: number
  /** Events of one repo handed to the writer at a time. */
  eventsPerWrite: number
  /** Record ops per write transaction at most (several repos share one). */
  opsPerWrite: number
  /** The accounts indexed, in a community deployment: others are neither fetched nor kept. */
  scope?: Scope
  /**
   * Identity lookups ahead of the writer: each repo's actor is looked up while its CAR is
   * fetched, so the writer's handle check for it finds the caches warm instead of waiting on
   * the network inside the transaction's turn.
   */
  prefetch?: Pick<IdentityPrefetch, 'see'>
  /** When a failed repo is fetched again. */
  retry: RetryPolicy
  /**
   * How long a repo's fetch may keep being retried (a host that keeps rate-limiting) before it
   * is given up for now: its live events are held meanwhile.
   */
  maxHoldMs: number
}

export const BACKFILL_DEFAULTS = {
  verify: false,
  concurrency: 128,
  perHost: 4,
  maxAttempts: 4,
  retryFailed: false,
  memoryBytes: 64 * 1024 * 1024,
  // One core stays with the writer's thread.
  workers: Math.min(4, Math.max(1, availableParallelism() - 1)),
  connectTimeoutMs: 30_000,
  idleTimeoutMs: 60_000,
  opsPerEvent: 100,
  eventsPerWrite: 20,
  opsPerWrite: 2000,
  retry: { baseMs: 60_000, maxMs: 6 * 3600_000 },
  maxHoldMs: 300_000,
} satisfies Partial<BackfillOptions>

export interface BackfillStats {
  startedAt: number
  done: number
  failed: number
  records: number
  bytes: number
  /** Fetches that failed and will be retried or were given up. */
  errors: number
  /** Accounts whose index was removed (they left the community). */
  purged: number
  inFlight: number
}
