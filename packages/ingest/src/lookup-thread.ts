// The writer's network lookups on a thread of their own. Resolving a DID document and checking
// its handle both ways is HTTP, JSON and caches: on a network new to the index (a first backfill,
// a fork's first hours) it took a tenth of the writer thread's time, which is the thread that
// bounds indexing. Here the writer's thread only posts the DID and gets the answer back. A worker
// that dies is replaced and its lookups asked again; workers that keep dying are given up and
// the lookups run on this thread, so a lookup is never lost to a worker.
import { Worker } from 'node:worker_threads'
import { createIdentity, type DidDocument, type IdentityOptions } from '@openplane/identity'
import { signingKeyOf } from '@openplane/signatures'
import { childLogger, counter } from '@openplane/telemetry'
import { writerDeps, type WriterDeps } from './deps.ts'
import {
  countPrefetched,
  ResolveQueue,
  type HandleWarmer,
  type PrefetchOutcome,
} from './resolve-queue.ts'
import { WorkerExits } from './worker-exits.ts'
import { READY, terminateWhenReady, whenReady } from './worker-ready.ts'

const log = childLogger('lookups')
const restarts = counter(
  'openplane_lookup_worker_restarts_total',
  'Lookup workers that died and were replaced',
)
/** CPU of the lookup thread: what the writer's thread is spared. */
const lookupCpuSeconds = counter(
  'openplane_lookup_cpu_seconds_total',
  'CPU time of the thread resolving identities and account hosting for the writer',
)

export interface LookupSetup {
  identity: IdentityOptions
  timeoutMs?: number
}

export type LookupRequest =
  | { id: number; kind: 'handle'; did: string; force: boolean }
  | { id: number; kind: 'hosted'; did: string }
  | { id: number; kind: 'doc'; did: string }
  | { id: number; kind: 'key'; did: string; refresh: boolean }

export interface LookupRequests {
  requests: LookupRequest[]
  /** Handles to resolve in the background (HandleWarmer), after dropping those not started. */
  clearWarming?: boolean
  warm?: string[]
}

export interface LookupReply {
  id: number
  value?: string | null | boolean | DidDocument
  error?: string
}

export interface LookupReplies {
  replies: LookupReply[]
  cpuSeconds: number
  /** Background resolutions finished since the last message, by outcome. */
  prefetched?: Partial<Record<PrefetchOutcome, number>>
}

interface Pending {
  request: LookupRequest
  resolve(value: LookupReply['value']): void
  reject(err: Error): void
}

export interface LookupThread extends WriterDeps, HandleWarmer {
  /**
   * A DID's document (a backfill's PDS and key), from the cache the handle checks use: a repo
   * fetched and then indexed costs one resolution. Throws when the DID does not resolve.
   */
  ensureResolve(did: string): Promise<DidDocument>
  /**
   * A DID's signing key as a did:key, or null (no document, or none in it): decode workers'
   * signature checks, from the documents the handle checks use (asked-keys.ts).
   */
  signingKey(did: string, refresh: boolean): Promise<string | null>
  /** Resolves once the thread's imports have run: its start-up paid before lookups come. */
  started(): Promise<void>
  stop(): Promise<void>
}

/** WriterDeps whose lookups run on a worker thread built from `setup`. */
export function lookupThread(setup: LookupSetup): LookupThread {
  return new Lookups(setup)
}

/** The lookups a worker answers, answered on the thread that builds this. */
export function lookupsHere(setup: LookupSetup) {
  const identity = createIdentity(setup.identity)
  const deps = writerDeps(identity, setup.timeoutMs)
  const ensureResolve = (did: string) => identity.idResolver.did.ensureResolve(did)
  const signingKey = async (did: string, refresh: boolean) => {
    const doc = await identity.resolveDidDoc(did, refresh)
    return (doc && signingKeyOf(doc)) ?? null
  }
  return {
    ...deps,
    ensureResolve,
    signingKey,
    answer(r: LookupRequest): Promise<LookupReply['value']> {
      if (r.kind === 'handle') return deps.resolveHandle(r.did, r.force)
      if (r.kind === 'hosted') return deps.isHosted(r.did)
      if (r.kind === 'key') return signingKey(r.did, r.refresh)
      return ensureResolve(r.did)
    },
  }
}
type Here = ReturnType<typeof lookupsHere>

class Lookups implements LookupThread {
  private readonly setup: LookupSetup
  private worker: Worker | undefined
  /** The worker's imports have run: it may be terminated (worker-ready.ts). */
  private ready: Promise<void> = Promise.resolve()
  private readonly pending = new Map<number, Pending>()
  private outgoing: LookupRequest[] = []
  /** Handles to warm, and whether the worker drops those it has not started first. */
  private warming: string[] = []
  private clearing = false
  /** Warms handles on this thread once workers keep dying. */
  private warmedHere: ResolveQueue | undefined
  private nextId = 0
  private stopped = false
  private readonly exits = new WorkerExits()
  /** Set once workers keep dying: lookups run on this thread from then on. */
  private here: Here | undefined

  constructor(setup: LookupSetup) {
    this.setup = setup
    this.worker = this.spawn()
  }

  resolveHandle(did: string, force: boolean): Promise<string | null | undefined> {
    if (this.here) return this.here.resolveHandle(did, force)
    return this.ask({ id: this.nextId++, kind: 'handle', did, force }) as Promise<
      string | null | undefined
    >
  }

  isHosted(did: string): Promise<boolean> {
    if (this.here) return this.here.isHosted(did)
    return this.ask({ id: this.nextId++, kind: 'hosted', did }) as Promise<boolean>
  }

  ensureResolve(did: string): Promise<DidDocument> {
    if (this.here) return this.here.ensureResolve(did)
    return this.ask({ id: this.nextId++, kind: 'doc', did }) as Promise<DidDocument>
  }

  signingKey(did: string, refresh: boolean): Promise<string | null> {
    if (this.here) return this.here.signingKey(did, refresh)
    return this.ask({ id: this.nextId++, kind: 'key', did, refresh }) as Promise<string | null>
  }

  warm(dids: readonly string[]): void {
    if (this.stopped) return
    if (this.here) {
      const here = this.here
      this.warmedHere ??= new ResolveQueue((did) => here.resolveHandle(did, false), countPrefetched)
      return this.warmedHere.warm(dids)
    }
    this.schedule()
    for (const did of dids) this.warming.push(did)
  }

  clearWarming(): void {
    this.warmedHere?.clearWarming()
    if (this.here) return
    this.schedule()
    this.warming = []
    this.clearing = true
  }

  async started(): Promise<void> {
    const worker = this.worker
    // Awaited, it holds the process up until loaded, as a lookup waiting on it would.
    worker?.ref()
    try {
      await this.ready
    } finally {
      if (!this.pending.size) worker?.unref()
    }
  }

  async stop(): Promise<void> {
    this.stopped = true
    const worker = this.worker
    this.worker = undefined
    for (const p of this.pending.values()) p.reject(new Error('lookups stopped'))
    this.pending.clear()
    if (worker) await terminateWhenReady(worker, this.ready)
  }

  private ask(request: LookupRequest): Promise<LookupReply['value']> {
    if (this.stopped) return Promise.reject(new Error('lookups stopped'))
    return new Promise((resolve, reject) => {
      // The worker keeps the process alive only while a lookup waits on it.
      if (!this.pending.size) this.worker?.ref()
      this.pending.set(request.id, { request, resolve, reject })
      this.schedule()
      this.outgoing.push(request)
    })
  }

  /** Lookups and warming asked in the same turn go out in one message. */
  private schedule(): void {
    if (!this.outgoing.length && !this.warming.length && !this.clearing) {
      setImmediate(() => this.send())
    }
  }

  private send(): void {
    const message: LookupRequests = { requests: this.outgoing }
    if (this.clearing) message.clearWarming = true
    if (this.warming.length) message.warm = this.warming
    this.outgoing = []
    this.warming = []
    this.clearing = false
    if (message.requests.length || message.warm || message.clearWarming) {
      this.worker?.postMessage(message)
    }
  }

  private spawn(): Worker {
    const worker = new Worker(new URL('./lookup-worker.ts', import.meta.url), {
      workerData: this.setup,
    })
    this.ready = whenReady(worker)
    worker.on('message', (msg: LookupReplies | typeof READY) => {
      if (msg === READY) return
      const { replies, cpuSeconds, prefetched } = msg
      lookupCpuSeconds.inc(cpuSeconds)
      for (const [outcome, n] of Object.entries(prefetched ?? {})) {
        countPrefetched(outcome as PrefetchOutcome, n)
      }
      for (const reply of replies) {
        const p = this.pending.get(reply.id)
        if (!p) continue
        this.pending.delete(reply.id)
        if (reply.error !== undefined) p.reject(new Error(reply.error))
        else p.resolve(reply.value)
      }
      if (!this.pending.size) worker.unref()
    })
    worker.on('error', (err) => log.error({ err }, 'lookup worker failed'))
    worker.on('exit', (code) => this.exited(worker, code))
    if (!this.pending.size) worker.unref()
    return worker
  }

  private exited(worker: Worker, code: number): void {
    if (this.stopped || worker !== this.worker) return
    restarts.inc()
    // Every lookup not answered, sent or not yet: asked again, once. Handles being warmed are
    // let go: only a head start is lost.
    const waiting = [...this.pending.values()]
    this.pending.clear()
    this.outgoing = []
    this.warming = []
    this.clearing = false
    if (this.exits.tooMany()) {
      log.error({ code }, 'lookup workers keep exiting; looking up on the writer thread')
      this.worker = undefined
      const here = lookupsHere(this.setup)
      this.here = here
      for (const p of waiting) here.answer(p.request).then(p.resolve, p.reject)
      return
    }
    log.error({ code, inFlight: waiting.length }, 'lookup worker exited; replacing it')
    this.worker = this.spawn()
    for (const p of waiting) this.pending.set(p.request.id, p)
    if (this.pending.size) this.worker.ref()
    this.outgoing = waiting.map((p) => p.request)
    if (this.outgoing.length) setImmediate(() => this.send())
  }
}
