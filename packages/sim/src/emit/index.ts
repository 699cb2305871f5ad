// Simulated users' actions as real atproto events: a local network of one firehose (a PDS-like
// server speaking com.atproto.sync.subscribeRepos) and a PLC directory stub, so any indexer (the
// stock RepoSubscription, ours) consumes posts and follows exactly as it would from a relay.
// Each create is a signed repo commit (sync v1.1: rev, since, prevData, MST blocks in the CAR).
import { hash32 } from '../rng.ts'
import { didFor, handleFor, idForHandle, tid } from '../ids.ts'
import { DEFAULT_HANDLE_DOMAIN, MAX_USERS } from '../params.ts'
import { CborWriter, cidToString, type Block } from './cbor.ts'
import { accountFrame, commitFrame, identityFrame, LocalFirehose } from './firehose.ts'
import { SimKeys } from './keys.ts'
import { PlcStub } from './plc.ts'
import { SignerPool } from './signer.ts'
import { followRecord, postRecord, signedCommit, SimRepo, SimRepos } from './repos.ts'

export { CborWriter, carFile, cidOf, cidToString, type Block, type CidBin } from './cbor.ts'
export { LocalFirehose, SUBSCRIBE_REPOS, type FirehoseOptions } from './firehose.ts'
export { privateKeyFor, SimKeys, type SimKeysOptions } from './keys.ts'
export { PlcStub, type DidDocument, type PlcStubOptions } from './plc.ts'
export { keyLayer, Mst, type OpAction } from './mst.ts'
export {
  MAX_COMMIT_OPS,
  SimRepo,
  type CommitOp,
  type PreparedCommit,
  type PreparedCreate,
  type RepoWrite,
  type SignedCommit,
} from './repos.ts'
export { SignerPool } from './signer.ts'
export { checkCommitFrame, ReferenceMst, referenceMstRoot, type CheckedCommit } from './verify.ts'

export interface LocalNetworkOptions {
  /** Seeds the users' signing keys (and the TID clock id): same seed, same keys. */
  seed: number
  handleDomain?: string
  /** Interface both servers listen on (default 127.0.0.1). */
  host?: string
  /** Port of the firehose / PDS server (default 0: any free port). */
  port?: number
  /** Port of the PLC stub (default 0). */
  plcPort?: number
  /** Highest simulated user id: the PLC stub knows DIDs 1..users only (default: any). */
  users?: number
  /** Seq of the first event (default: now in microseconds, so each run continues the last). */
  firstSeq?: number
  /** Frames kept in memory for consumers resuming from a cursor (default 100 000). */
  backlog?: number
  /**
   * Send #identity and #account (active) before a user's first commit, as a PDS does for a new
   * account (default false: indexers create actors from commits; the userbase has them anyway).
   */
  announce?: boolean
  /** Keypairs of non-emitting users cached for the PLC stub (default 100 000). */
  keyCacheSize?: number
  /**
   * Worker threads that sign commits (default 0: sign on the calling thread, ~3k commits/s per
   * core). Signing is most of an emission's cost; workers only help callers that issue several
   * events without awaiting each one.
   */
  signers?: number
}

export interface EmitOptions {
  /** The record's createdAt (default: the emission time, which the TID record key also holds). */
  createdAt?: string
}

export interface PostOptions extends EmitOptions {
  text?: string
}

export interface Emitted {
  uri: string
  /** CID of the record. */
  cid: string
  seq: number
}

export class LocalNetwork {
  readonly seed: number
  readonly handleDomain: string
  readonly users: number
  readonly announce: boolean
  readonly keys: SimKeys
  readonly firehose: LocalFirehose
  readonly plc: PlcStub
  private readonly signers: SignerPool | undefined
  /** Events emitted so far: published commits, plus identity/account events when announcing. */
  emitted = 0
  private readonly repos: SimRepos
  private readonly w = new CborWriter()
  private readonly clockId: number
  private lastUs = 0
  private closed = false

  private constructor(
    opts: LocalNetworkOptions,
    keys: SimKeys,
    firehose: LocalFirehose,
    plc: PlcStub,
  ) {
    this.seed = opts.seed
    this.handleDomain = opts.handleDomain ?? DEFAULT_HANDLE_DOMAIN
    this.users = opts.users ?? MAX_USERS
    this.announce = opts.announce ?? false
    this.keys = keys
    this.firehose = firehose
    this.plc = plc
    this.clockId = hash32(opts.seed, 0x7e1d) & 1023
    this.signers = opts.signers
      ? new SignerPool({ seed: opts.seed, workers: opts.signers })
      : undefined
    // With workers the keys live there; the repo's keypair is only used to sign in-thread.
    this.repos = new SimRepos(
      (id) => new SimRepo(didFor(id), this.signers ? null : keys.keypair(id)),
    )
  }

  static async start(opts: LocalNetworkOptions): Promise<LocalNetwork> {
    const host = opts.host ?? '127.0.0.1'
    const users = opts.users ?? MAX_USERS
    const domain = (opts.handleDomain ?? DEFAULT_HANDLE_DOMAIN).toLowerCase()
    const keys = new SimKeys({ seed: opts.seed, cacheSize: opts.keyCacheSize })
    const firehose = await LocalFirehose.start({
      host,
      port: opts.port ?? 0,
      backlog: opts.backlog ?? 100_000,
      // A later run's seqs must exceed an earlier run's (an indexer resumes from its stored
      // cursor and refuses a stream behind it): start at the clock in microseconds, which stays
      // ahead as long as fewer than a million events are emitted per second.
      firstSeq: opts.firstSeq ?? Date.now() * 1000,
      didForHandle: (handle) => {
        const id = idForHandle(handle, domain, users)
        return id === undefined ? undefined : didFor(id)
      },
    })
    try {
      const plc = await PlcStub.start({
        host,
        port: opts.plcPort ?? 0,
        keys,
        handleDomain: domain,
        users,
        pdsUrl: firehose.httpUrl,
      })
      return new LocalNetwork({ ...opts, handleDomain: domain }, keys, firehose, plc)
    } catch (err) {
      await firehose.close()
      throw err
    }
  }

  /** ws:// base URL of the firehose (indexers append /xrpc/com.atproto.sync.subscribeRepos). */
  get url(): string {
    return this.firehose.url
  }

  /** http:// URL of the PDS-like server (the DID documents' #atproto_pds; handle well-known). */
  get pdsUrl(): string {
    return this.firehose.httpUrl
  }

  get plcUrl(): string {
    return this.plc.url
  }

  /** Seq of the last published event. */
  get seq(): number {
    return this.firehose.head
  }

  /** Users that have emitted (each holds a repo: its records' MST, no record bodies). */
  get activeUsers(): number {
    return this.repos.size
  }

  /** An app.bsky.feed.post create by `userId`, resolved once published on the firehose. */
  post(userId: number, opts: PostOptions = {}): Promise<Emitted> {
    return this.emit(userId, 'app.bsky.feed.post', (w, createdAt, n) =>
      postRecord(w, opts.text ?? `post ${n} by user${userId}`, opts.createdAt ?? createdAt),
    )
  }

  /** An app.bsky.graph.follow create: `userId` follows `subjectId`. */
  follow(userId: number, subjectId: number, opts: EmitOptions = {}): Promise<Emitted> {
    if (subjectId === userId) return Promise.reject(new Error(`user ${userId} cannot follow self`))
    try {
      this.checkUser(subjectId)
    } catch (err) {
      return Promise.reject(err)
    }
    const subject = didFor(subjectId)
    return this.emit(userId, 'app.bsky.graph.follow', (w, createdAt) =>
      followRecord(w, subject, opts.createdAt ?? createdAt),
    )
  }

  private checkUser(id: number): void {
    if (!Number.isSafeInteger(id) || id < 1 || id > this.users) {
      throw new RangeError(`not a simulated user id: ${id} (1..${this.users})`)
    }
  }

  /** A TID from a microsecond clock that never repeats or goes back. */
  private nextTid(): { rkey: string; createdAt: string } {
    const us = Math.max(Date.now() * 1000, this.lastUs + 1)
    this.lastUs = us
    return { rkey: tid(us, this.clockId), createdAt: new Date(Math.floor(us / 1000)).toISOString() }
  }

  /**
   * Everything up to signing happens synchronously, in call order: the seq is taken and the repo
   * moves on before the first await, so events publish in call order whatever resolves first.
   */
  private async emit(
    userId: number,
    collection: string,
    makeRecord: (w: CborWriter, createdAt: string, n: number) => Block,
  ): Promise<Emitted> {
    if (this.closed) throw new Error('local network is closed')
    this.checkUser(userId)
    const isNew = !this.repos.has(userId)
    const repo = this.repos.get(userId)
    const { rkey, createdAt } = this.nextTid()
    const record = makeRecord(this.w, createdAt, repo.records + 1)
    const prepared = repo.create(this.w, collection, rkey, record, rkey)
    if (isNew && this.announce) {
      const time = new Date().toISOString()
      const handle = handleFor(userId, this.handleDomain)
      const idSeq = this.firehose.reserve()
      void this.firehose.fill(idSeq, '#identity', identityFrame(idSeq, time, repo.did, handle))
      const acSeq = this.firehose.reserve()
      void this.firehose.fill(acSeq, '#account', accountFrame(acSeq, time, repo.did))
      this.emitted += 2
    }
    const seq = this.firehose.reserve()
    let frame: Uint8Array | null = null
    try {
      const sig = repo.keypair
        ? await repo.keypair.sign(prepared.unsigned)
        : await this.signers!.sign(userId, prepared.unsigned)
      const signed = signedCommit(this.w, prepared, sig)
      frame = commitFrame(this.w, seq, new Date().toISOString(), signed)
    } finally {
      // A failed event leaves a gap in the seqs rather than stalling every later one.
      await this.firehose.fill(seq, '#commit', frame)
    }
    this.emitted++
    return {
      uri: `at://${repo.did}/${prepared.path}`,
      cid: cidToString(record.cid),
      seq,
    }
  }

  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    await Promise.all([this.firehose.close(), this.plc.close(), this.signers?.close()])
  }
}
