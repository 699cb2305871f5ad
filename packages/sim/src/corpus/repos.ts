// Whole repos of the corpus's users, for backfills to fetch (com.atproto.sync.getRepo) and list
// (listRepos). The corpus holds each commit's new blocks; reading it once in order leaves every
// user's records as of the last commit. A repo's CAR is built on request with the toolkit's own
// tree and writer (emit/: a fresh tree of those records, committed at the user's last rev and
// signed with the user's key from the corpus seed), so it verifies against the DID documents the
// replay server answers. Building and signing one costs the server milliseconds; with `keepCars`
// each CAR is built once and served from memory after, as a PDS serves its stored blocks, so a
// bench that warms the server first measures the consumer, not the CAR builder sharing its cores.
import { carFile, cidOf, CborWriter, type Block } from '../emit/cbor.ts'
import { SimKeys } from '../emit/keys.ts'
import { Mst } from '../emit/mst.ts'
import { commitBlock, unsignedCommit } from '../emit/repos.ts'
import { didFor, idForDid } from '../ids.ts'
import type { CorpusReader } from './file.ts'
import { bytesOf, carBlocks, linkText, readFrame } from './frame-read.ts'

interface UserRepo {
  rev: string
  /** Record bytes (DAG-CBOR) by `collection/rkey`. */
  records: Map<string, Uint8Array>
}

export class CorpusRepos {
  private readonly users = new Map<number, UserRepo>()
  private readonly keys: SimKeys
  /** Highest user id of the corpus (DIDs are derived from ids). */
  private readonly maxId: number
  /** Built CARs by DID, when kept. */
  private readonly cars: Map<string, Uint8Array> | undefined

  private constructor(seed: number, maxId: number, keepCars: boolean) {
    this.keys = new SimKeys({ seed })
    this.maxId = maxId
    this.cars = keepCars ? new Map() : undefined
  }

  /** Reads the corpus once; `onProgress` every 50,000 frames. */
  static async load(
    corpus: CorpusReader,
    onProgress?: (frames: number) => void,
    opts: { keepCars?: boolean } = {},
  ): Promise<CorpusRepos> {
    const self = new CorpusRepos(corpus.header.seed, corpus.header.users, opts.keepCars ?? false)
    let n = 0
    for await (const { bytes } of corpus.messages()) {
      if (++n % 50_000 === 0) onProgress?.(n)
      const frame = readFrame(bytes)
      if (frame?.t !== '#commit') continue
      const { repo, rev, blocks, ops } = frame.body as {
        repo: string
        rev: string
        blocks: unknown
        ops: { action: string; path: string; cid: unknown }[]
      }
      const id = idForDid(repo, self.maxId)
      if (id === undefined) continue
      const user = self.users.get(id) ?? { rev, records: new Map() }
      self.users.set(id, user)
      user.rev = rev
      const inCar = carBlocks(bytesOf(blocks))
      for (const op of ops) {
        const cid = linkText(op.cid)
        if (op.action === 'delete' || !cid) {
          user.records.delete(op.path)
          continue
        }
        const record = inCar.get(cid)
        if (record) user.records.set(op.path, record)
      }
    }
    return self
  }

  /** Users with a repo, in id order. */
  ids(): number[] {
    return [...this.users.keys()].sort((a, b) => a - b)
  }

  records(): number {
    let n = 0
    for (const u of this.users.values()) n += u.records.size
    return n
  }

  /** The listRepos entry of a user. */
  entry(id: number): { did: string; rev: string; active: true } | undefined {
    const u = this.users.get(id)
    return u && { did: didFor(id), rev: u.rev, active: true }
  }

  /** The user's whole repo as a CAR, or undefined for a DID without one. */
  async car(did: string): Promise<Uint8Array | undefined> {
    const kept = this.cars?.get(did)
    if (kept) return kept
    const car = await this.build(did)
    if (car) this.cars?.set(did, car)
    return car
  }

  private async build(did: string): Promise<Uint8Array | undefined> {
    const id = idForDid(did, this.maxId)
    const user = id === undefined ? undefined : this.users.get(id)
    if (!user || id === undefined) return undefined
    const w = new CborWriter()
    const tree = new Mst()
    const blocks: Block[] = []
    const held = new Set<string>()
    for (const [path, bytes] of user.records) {
      const cid = cidOf(bytes)
      tree.add(path, cid)
      // Identical records share one block.
      if (!held.has(cid)) blocks.push({ cid, bytes })
      held.add(cid)
    }
    const data = tree.commit(w, blocks)
    const sig = await this.keys.keypair(id).sign(unsignedCommit(w, did, user.rev, data))
    const commit = commitBlock(w, { did, rev: user.rev, data }, sig)
    return carFile(w, commit.cid, [commit, ...blocks])
  }
}
