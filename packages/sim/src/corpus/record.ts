// Records a generated firehose once: each step becomes a real event (a signed sync-v1.1 commit
// over the user's repo, or an #identity / #account message), framed as subscribeRepos sends it
// and appended to the corpus file. Signing runs on worker threads; everything else stays in
// step order, so seqs, revs and the file are the same on every run with the same parameters.
import { CborWriter, messageFrame } from '../emit/cbor.ts'
import { commitFrame } from '../emit/firehose.ts'
import { SimKeys } from '../emit/keys.ts'
import { signedCommit, SimRepo, SimRepos } from '../emit/repos.ts'
import { SignerPool } from '../emit/signer.ts'
import { didFor, tid } from '../ids.ts'
import { hash32 } from '../rng.ts'
import { CorpusWriter, type CorpusSummary } from './file.ts'
import { FirehoseGenerator, type Step } from './generate.ts'
import type { FirehoseParams } from './params.ts'

export interface RecordOptions {
  /** Worker threads signing commits (default 2; 0 signs on this thread). */
  signers?: number
  /** Called every `progressEvery` events with the count so far. */
  onProgress?: (done: number, total: number) => void
  progressEvery?: number
  /** Sees each message as it is written (checks that a replay serves exactly these bytes). */
  onFrame?: (seq: number, message: Uint8Array) => void
}

/** Events whose signatures may be outstanding at once; bounds memory, keeps workers busy. */
const WINDOW = 512

export async function recordFirehose(
  params: FirehoseParams,
  file: string,
  opts: RecordOptions = {},
): Promise<CorpusSummary> {
  const workers = opts.signers ?? 2
  const keys = workers ? undefined : new SimKeys({ seed: params.seed })
  const signers = workers ? new SignerPool({ seed: params.seed, workers }) : undefined
  const repos = new SimRepos((id) => new SimRepo(didFor(id), keys ? keys.keypair(id) : null))
  const gen = new FirehoseGenerator(params)
  const w = new CborWriter()
  // Frames are finished in signature callbacks; they get a writer of their own.
  const fw = new CborWriter()
  const clockId = hash32(params.seed, 0xc0) & 1023
  const out = await CorpusWriter.create(file, {
    format: 1,
    source: { generator: 'openplane-sim firehose', params },
    users: params.repos,
    seed: params.seed,
    handle_domain: params.handle_domain,
  })
  // Frames in step order; each waits for its signature.
  const window: { seq: number; time: string; frame: Promise<Uint8Array> }[] = []
  const every = opts.progressEvery ?? 10_000
  let seq = 0
  const signing = new Set<number>()
  try {
    for (let step = gen.next(); step; step = gen.next()) {
      seq++
      const time = new Date(Math.floor(step.timeUs / 1000)).toISOString()
      window.push({ seq, time, frame: frameOf(step, seq, time) })
      if (window.length >= WINDOW) await drain(window, out, WINDOW / 2, opts.onFrame)
      if (seq % every === 0) opts.onProgress?.(seq, params.events)
    }
    await drain(window, out, 0, opts.onFrame)
    // The replay server answers DID documents from these instead of deriving each key again.
    const users = [...signing].sort((a, b) => a - b)
    const publicKeys = signers
      ? await signers.publicKeys(users)
      : new Map(users.map((u) => [u, keys!.publicKeyMultibase(u)]))
    return await out.finish({ ...gen.counts }, Object.fromEntries(publicKeys))
  } catch (err) {
    await out.abort()
    throw err
  } finally {
    await signers?.close()
  }

  function frameOf(step: Step, seq: number, time: string): Promise<Uint8Array> {
    const did = didFor(step.user)
    if (step.type === 'identity') {
      return Promise.resolve(messageFrame(w, '#identity', { seq, did, time, handle: step.handle }))
    }
    if (step.type === 'account') {
      const body = step.active
        ? { seq, did, time, active: true }
        : { seq, did, time, active: false, status: 'deactivated' }
      return Promise.resolve(messageFrame(w, '#account', body))
    }
    // The repo moves on now, in step order; only the signature is awaited.
    signing.add(step.user)
    const repo = repos.get(step.user)
    const prepared = repo.commit(w, [step.op], tid(step.timeUs, clockId))
    const sig = repo.keypair
      ? repo.keypair.sign(prepared.unsigned)
      : signers!.sign(step.user, prepared.unsigned)
    return sig.then((s) => commitFrame(fw, seq, time, signedCommit(fw, prepared, s)))
  }
}

async function drain(
  window: { seq: number; time: string; frame: Promise<Uint8Array> }[],
  out: CorpusWriter,
  keep: number,
  onFrame: RecordOptions['onFrame'],
): Promise<void> {
  while (window.length > keep) {
    const next = window.shift()!
    const frame = await next.frame
    onFrame?.(next.seq, frame)
    await out.add(next.seq, next.time, frame)
  }
}
