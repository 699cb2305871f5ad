// Commit signing on worker threads. Signing (secp256k1) is most of an emission's cost, and each
// commit's signature depends on nothing but its own bytes, so it spreads over cores while the
// main thread keeps the repos and the order. Users are sharded over workers by id, so each
// worker derives (and caches) the keys of its own users only.
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads'
import { SimKeys } from './keys.ts'

interface SignBatch {
  id: number
  users: number[]
  messages: Uint8Array[]
  /** Asks for the users' public keys (multibase) instead of signatures. */
  keysOnly?: boolean
}

interface SignResult {
  id: number
  sigs?: Uint8Array[]
  keys?: string[]
  error?: string
}

interface WorkerInit {
  openplaneSigner: true
  seed: number
  cacheSize: number
}

interface SignRequest {
  user: number
  message: Uint8Array
  done: (sig: Uint8Array) => void
  fail: (err: Error) => void
}

class Shard {
  readonly worker: Worker
  queue: SignRequest[] = []
  readonly inFlight = new Map<number, SignRequest[]>()
  scheduled = false

  constructor(init: WorkerInit) {
    this.worker = new Worker(new URL(import.meta.url), { workerData: init })
    this.worker.unref()
    this.worker.on('message', (res: SignResult) => {
      const batch = this.inFlight.get(res.id)
      if (!batch) return
      this.inFlight.delete(res.id)
      if (!this.inFlight.size) this.worker.unref()
      batch.forEach((req, i) => {
        const sig = res.sigs?.[i]
        if (sig) req.done(sig)
        else req.fail(new Error(`signing failed: ${res.error ?? 'no signature'}`))
      })
    })
    this.worker.on('error', (err) => this.failAll(err))
  }

  failAll(err: Error): void {
    for (const batch of this.inFlight.values()) for (const req of batch) req.fail(err)
    this.inFlight.clear()
    for (const req of this.queue) req.fail(err)
    this.queue = []
  }
}

let nextBatch = 1

export class SignerPool {
  private readonly shards: Shard[]

  constructor(opts: { seed: number; workers: number; cacheSize?: number }) {
    const init: WorkerInit = {
      openplaneSigner: true,
      seed: opts.seed,
      cacheSize: Math.max(1, Math.ceil((opts.cacheSize ?? 100_000) / opts.workers)),
    }
    this.shards = Array.from({ length: Math.max(1, opts.workers) }, () => new Shard(init))
  }

  get size(): number {
    return this.shards.length
  }

  /** The signature of `message` by the user's key; requests of one tick go out as one batch. */
  sign(user: number, message: Uint8Array): Promise<Uint8Array> {
    const shard = this.shards[user % this.shards.length]!
    return new Promise((done, fail) => {
      shard.queue.push({ user, message, done, fail })
      if (shard.scheduled) return
      shard.scheduled = true
      queueMicrotask(() => {
        shard.scheduled = false
        const batch = shard.queue
        shard.queue = []
        const id = nextBatch++
        shard.inFlight.set(id, batch)
        shard.worker.ref()
        const msg: SignBatch = {
          id,
          users: batch.map((r) => r.user),
          messages: batch.map((r) => r.message),
        }
        shard.worker.postMessage(msg)
      })
    })
  }

  /**
   * The users' public keys (`publicKeyMultibase`), from the workers that hold their keypairs: a
   * key derivation costs about a millisecond, already paid for every user a worker signed for.
   */
  async publicKeys(users: number[]): Promise<Map<number, string>> {
    const out = new Map<number, string>()
    await Promise.all(
      this.shards.map(async (shard, i) => {
        const mine = users.filter((u) => u % this.shards.length === i)
        if (!mine.length) return
        const id = nextBatch++
        const keys = await new Promise<string[]>((resolve, reject) => {
          const onMessage = (res: SignResult) => {
            if (res.id !== id) return
            shard.worker.off('message', onMessage)
            if (res.keys) resolve(res.keys)
            else reject(new Error(`public keys failed: ${res.error ?? 'no keys'}`))
          }
          shard.worker.on('message', onMessage)
          shard.worker.ref()
          const msg: SignBatch = { id, users: mine, messages: [], keysOnly: true }
          shard.worker.postMessage(msg)
        })
        if (!shard.inFlight.size) shard.worker.unref()
        mine.forEach((u, j) => out.set(u, keys[j]!))
      }),
    )
    return out
  }

  async close(): Promise<void> {
    await Promise.all(
      this.shards.map(async (s) => {
        s.failAll(new Error('signer pool closed'))
        await s.worker.terminate()
      }),
    )
  }
}

function runWorker(init: WorkerInit): void {
  const keys = new SimKeys({ seed: init.seed, cacheSize: init.cacheSize })
  parentPort!.on('message', async (batch: SignBatch) => {
    const res: SignResult = { id: batch.id }
    try {
      if (batch.keysOnly) {
        res.keys = batch.users.map((u) => keys.publicKeyMultibase(u))
        parentPort!.postMessage(res)
        return
      }
      const sigs: Uint8Array[] = []
      for (let i = 0; i < batch.users.length; i++) {
        sigs.push(await keys.keypair(batch.users[i]!).sign(batch.messages[i]!))
      }
      res.sigs = sigs
    } catch (err) {
      res.error = (err as Error).message
    }
    parentPort!.postMessage(res)
  })
}

if (!isMainThread && (workerData as WorkerInit | undefined)?.openplaneSigner) {
  runWorker(workerData as WorkerInit)
}
