// A fetched repo CAR → its commit and its records, in key order. In verifying mode every block's
// hash is checked against its CID, the commit must name the repo's DID and be signed by the key
// in its DID document; the records are those the commit's tree reaches (a block it does not
// reach is ignored). A tree node the CAR lacks fails the repo; a record block it lacks or that
// does not decode is reported and left out, as the firehose path does with a commit's ops.
import { encode } from '@atproto/lex-cbor'
import type { Cid } from '@atproto/lex-data'
import { def, MST, readCarStream } from '@atproto/repo'
import type { CommitOp } from '@openplane/ingest'
import { verifySignature } from '@openplane/signatures'
import { SpillStore } from './block-store.ts'
import { RepoFetchError } from './fetch-repo.ts'

export class RepoCarError extends Error {}

export interface RepoRecord {
  collection: string
  rkey: string
  cid: string
  /** Absent when the record was found invalid where it was read (`checked`). */
  record?: unknown
  /** The record's verdict when it was checked where it was read (repo-decode.ts). */
  checked?: CommitOp['checked']
}

export interface RepoCar {
  did: string
  rev: string
  commit: string
  /** Bytes of blocks read. */
  bytes: number
  /** The records in key order; a record block that does not decode is reported, not yielded. */
  records(onBad: (key: string, reason: string) => void): AsyncIterable<RepoRecord>
  close(): Promise<void>
}

export interface ReadOptions {
  did: string
  /** The DID document's signing key (did:key form) when verifying; undefined: trusted. */
  signingKey: string | undefined
  /** Blocks beyond this many bytes go to a temporary file. */
  memoryBytes: number
}

export async function readRepoCar(
  car: AsyncIterable<Uint8Array>,
  opts: ReadOptions,
): Promise<RepoCar> {
  const verify = opts.signingKey !== undefined
  const store = new SpillStore(opts.memoryBytes)
  try {
    const { roots, blocks } = await readCarStream(car, { skipCidVerification: !verify }).catch(
      (err: unknown) => {
        throw new RepoCarError(`unreadable CAR header: ${messageOf(err)}`)
      },
    )
    const root = roots[0]
    if (!root || roots.length !== 1) throw new RepoCarError(`CAR has ${roots.length} roots`)
    try {
      for await (const block of blocks) await store.put(block.cid, block.bytes)
    } catch (err) {
      // A stalled or cut body is the fetch's failure (retried), not a malformed CAR.
      if (err instanceof RepoFetchError) throw err
      throw new RepoCarError(`malformed CAR: ${messageOf(err)}`)
    }
    const commit = await store.readObj(root, def.versionedCommit).catch((err: unknown) => {
      throw new RepoCarError(`no readable commit at the CAR's root: ${messageOf(err)}`)
    })
    if (commit.did !== opts.did) {
      throw new RepoCarError(`commit is for ${commit.did}, not ${opts.did}`)
    }
    if (verify) {
      if (commit.version !== 3) throw new RepoCarError(`commit version ${commit.version}`)
      // The signed bytes are the commit without its signature, as DAG-CBOR (what the stock's
      // verifyCommitSig checks); the check runs natively (@openplane/signatures).
      const { sig, ...unsigned } = commit
      if (!verifySignature(opts.signingKey!, encode(unsigned), sig)) {
        throw new RepoCarError('commit signature does not verify against the DID document')
      }
    }
    // Revs order a repo's backfill against its live commits; a commit without one is too old.
    const rev = commit.rev
    if (typeof rev !== 'string') throw new RepoCarError('commit has no rev')
    const mst = MST.load(store, commit.data)
    return {
      did: commit.did,
      rev,
      commit: root.toString(),
      bytes: store.bytes,
      records: (onBad) => walkRecords(store, mst, onBad),
      close: () => store.close(),
    }
  } catch (err) {
    await store.close()
    throw err
  }
}

async function* walkRecords(
  store: SpillStore,
  mst: MST,
  onBad: (key: string, reason: string) => void,
): AsyncIterable<RepoRecord> {
  let leaves
  try {
    leaves = mst.walkLeavesFrom('')
  } catch (err) {
    throw new RepoCarError(`unreadable tree: ${messageOf(err)}`)
  }
  const iterator = leaves[Symbol.asyncIterator]()
  for (;;) {
    let next: IteratorResult<{ key: string; value: Cid }>
    try {
      next = await iterator.next()
    } catch (err) {
      throw new RepoCarError(`tree incomplete or malformed: ${messageOf(err)}`)
    }
    if (next.done) return
    const { key, value: cid } = next.value
    const slash = key.indexOf('/')
    if (slash <= 0 || slash === key.length - 1 || key.indexOf('/', slash + 1) !== -1) {
      onBad(key, 'malformed record key')
      continue
    }
    let record: unknown
    try {
      record = await store.readRecord(cid)
    } catch (err) {
      onBad(key, `unreadable record: ${messageOf(err)}`)
      continue
    }
    yield {
      collection: key.slice(0, slash),
      rkey: key.slice(slash + 1),
      cid: cid.toString(),
      record,
    }
  }
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err)
}
