// Fetched repo CARs read and checked on worker threads, so that the writer's thread only plans and
// writes (as the firehose's frames are decoded beside it: @openplane/ingest's decoder.ts). A CAR
// is gathered whole in memory and handed to the least busy worker, as long as the CARs held at
// once stay within `memoryBytes`; one that does not fit is read on this thread as it streams, by
// the reference reader (car.ts), which spills blocks to a file. So memory stays bounded however
// many repos are fetched at once. A worker that dies is replaced and its repos are read
// again; a repo that kills two workers, or workers that keep dying, are read on this thread, so
// a repo is never lost to a worker.
import { Worker } from 'node:worker_threads'
import {
  READY,
  reviveCids,
  terminateWhenReady,
  threadCpuSeconds,
  whenLoaded,
  whenReady,
  WorkerExits,
} from '@openplane/ingest'
import { childLogger, counter } from '@openplane/telemetry'
import { readRepoCar, RepoCarError, type RepoCar, type RepoRecord } from './car.ts'
import { decodeRepo, type DecodedRepo, type DecodeRequest } from './repo-decode.ts'

const log = childLogger('backfill')
const decodeCpu = counter(
  'openplane_backfill_decode_cpu_seconds_total',
  'CPU time reading and checking repo CARs (CAR workers, or the backfill thread without them)',
)
const reads = counter(
  'openplane_backfill_car_reads_total',
  'Repo CARs read, by reader: fast (the common case), reference (an odd or refused CAR), ' +
    'streamed (larger than DATAPLANE_BACKFILL_MEMORY_MB: blocks spilled to a file)',
  ['reader'],
)
const restarts = counter(
  'openplane_backfill_car_worker_restarts_total',
  'CAR workers that died and were replaced',
)

export interface CarRequest extends DecodeRequest {
  id: number
  bytes: Uint8Array
}

export interface CarReply {
  id: number
  repo?: DecodedRepo
  /** `car`: the CAR was refused (RepoCarError); else reading it failed otherwise. */
  error?: { message: string; car: boolean }
  cpuSeconds: number
}

interface Job {
  request: CarRequest
  resolve: (repo: DecodedRepo) => void
  reject: (err: unknown) => void
  tries: number
}

interface Slot {
  worker: Worker
  /** The worker's imports have run: it may be terminated (worker-ready.ts). */
  ready: Promise<void>
  jobs: Map<number, Job>
}

export class CarReader {
  private readonly slots: Slot[] = []
  private readonly memoryBytes: number
  /** Bytes of the CARs gathered or being read in memory now. */
  private held = 0
  /** Workers still to start: they start with the first CAR, so a reader never used has none. */
  private unstarted: number
  private nextId = 0
  private stopped = false
  private readonly exits = new WorkerExits()

  /** `workers`: threads to read CARs on (0: this thread); `memoryBytes`: over all CARs held. */
  constructor(opts: { workers: number; memoryBytes: number }) {
    this.memoryBytes = opts.memoryBytes
    this.unstarted = opts.workers
  }

  /**
   * Reads the fetched body as the repo's CAR. Throws RepoCarError for a CAR that is refused, and
   * the body's own errors (RepoFetchError) as they come.
   */
  async read(
    body: AsyncIterable<Uint8Array>,
    req: Omit<DecodeRequest, 'memoryBytes'>,
  ): Promise<RepoCar> {
    if (this.stopped) throw new Error('the CAR reader is stopped')
    const it = body[Symbol.asyncIterator]()
    const chunks: Uint8Array[] = []
    let size = 0
    try {
      for (;;) {
        const next = await it.next()
        if (next.done) break
        chunks.push(next.value)
        size += next.value.length
        this.held += next.value.length
        if (this.held > this.memoryBytes) {
          // Too large to hold now: streamed through the reference reader, which spills to a file.
          this.held -= size
          size = 0
          const rest = (async function* () {
            yield* chunks
            for (let n = await it.next(); !n.done; n = await it.next()) yield n.value
          })()
          reads.inc({ reader: 'streamed' })
          return await readRepoCar(rest, { ...req, memoryBytes: this.memoryBytes })
        }
      }
      const bytes = new Uint8Array(size)
      let at = 0
      for (const c of chunks) {
        bytes.set(c, at)
        at += c.length
      }
      chunks.length = 0
      const request = { ...req, memoryBytes: this.memoryBytes, id: 0, bytes }
      this.spawnUnstarted()
      if (!this.slots.length) return carOf(await this.decodeHere(request), false)
      return carOf(await this.decode(request), true)
    } finally {
      this.held -= size
    }
  }

  /**
   * Starts the workers now rather than with the first CAR, resolving once their imports have
   * run: for a caller that wants that start-up (about a second of CPU) paid before work comes.
   */
  started(): Promise<void> {
    this.spawnUnstarted()
    return whenLoaded([...this.slots])
  }

  async stop(): Promise<void> {
    this.stopped = true
    await Promise.all(this.slots.map((s) => terminateWhenReady(s.worker, s.ready)))
  }

  private spawnUnstarted(): void {
    for (; this.unstarted > 0 && !this.stopped; this.unstarted--) this.slots.push(this.spawn())
  }

  private decode(request: CarRequest): Promise<DecodedRepo> {
    // Stopped while the CAR was being gathered: its workers are gone.
    if (this.stopped) return Promise.reject(new Error('the CAR reader is stopped'))
    return new Promise((resolve, reject) => {
      const job = { request: { ...request, id: this.nextId++ }, resolve, reject, tries: 0 }
      const slot = this.slots.reduce((a, b) => (b.jobs.size < a.jobs.size ? b : a))
      this.post(slot, job)
    })
  }

  private async decodeHere(request: CarRequest): Promise<DecodedRepo> {
    const before = threadCpuSeconds()
    try {
      return await decodeRepo(request.bytes, request)
    } finally {
      decodeCpu.inc(threadCpuSeconds() - before)
    }
  }

  private post(slot: Slot, job: Job): void {
    slot.jobs.set(job.request.id, job)
    // Copied, not moved: a worker that dies leaves the bytes here to read again.
    slot.worker.postMessage(job.request)
  }

  private spawn(): Slot {
    const worker = new Worker(new URL('./car-worker.ts', import.meta.url))
    const slot: Slot = { worker, ready: whenReady(worker), jobs: new Map() }
    worker.on('message', (reply: CarReply | typeof READY) => {
      if (reply === READY) return
      const job = slot.jobs.get(reply.id)
      if (!job) return
      slot.jobs.delete(reply.id)
      decodeCpu.inc(reply.cpuSeconds)
      if (reply.repo) job.resolve(reply.repo)
      else if (reply.error?.car) job.reject(new RepoCarError(reply.error.message))
      else job.reject(new Error(reply.error?.message ?? 'CAR worker answered nothing'))
    })
    worker.on('error', (err) => log.error({ err }, 'CAR worker failed'))
    worker.on('exit', (code) => {
      if (this.stopped) {
        for (const job of slot.jobs.values()) job.reject(new Error('the CAR reader stopped'))
        return
      }
      restarts.inc()
      this.slots.splice(this.slots.indexOf(slot), 1)
      const orphans = [...slot.jobs.values()]
      if (this.exits.tooMany()) {
        log.error({ code }, 'CAR workers keep exiting; reading CARs on the backfill thread')
        for (const s of this.slots.splice(0)) {
          orphans.push(...s.jobs.values())
          void s.worker.terminate()
        }
      } else {
        log.error({ code, inFlight: slot.jobs.size }, 'CAR worker exited; replacing it')
        this.slots.push(this.spawn())
      }
      for (const job of orphans) {
        if (!this.slots.length || ++job.tries >= 2) {
          this.decodeHere(job.request).then(job.resolve, job.reject)
        } else this.post(this.slots[0]!, job)
      }
    })
    // Idle workers must not keep the process alive.
    worker.unref()
    return slot
  }
}

/**
 * The decoded repo as the backfill reads a CAR; `cloned` (from a worker): its records' CIDs are
 * made CIDs again.
 */
function carOf(repo: DecodedRepo, cloned: boolean): RepoCar {
  reads.inc({ reader: repo.reader })
  return {
    did: repo.did,
    rev: repo.rev,
    commit: repo.commit,
    bytes: repo.bytes,
    async *records(onBad) {
      for (const { key, reason } of repo.bad) onBad(key, reason)
      for (const r of repo.records as RepoRecord[]) {
        if (cloned && r.record !== undefined) r.record = reviveCids(r.record)
        yield r
      }
    },
    close: async () => {},
  }
}
