// A fetched repo's CAR, whole in memory → its commit and its records checked, ready for the
// writer: what a CAR worker does for each repo (car-reader.ts), or this thread without workers.
// The fast reader (car-fast.ts) takes the common case; anything else is read by the reference
// reader (car.ts), which decides and reports as it always did. Records of collections no plugin
// indexes are dropped here (they leave no row); each other record is checked as a firehose
// record is on a decode worker (the lexicon, the stock's rules) and carries its verdict.
import { checkRecords, type CommitOp, type IngestEvent } from '@openplane/ingest'
import { pluginFor } from '@openplane/plugins'
import { readRepoFast, type ReadRepo } from './car-fast.ts'
import { readRepoCar } from './car.ts'

/** A record ready for the writer: valid with its JSON, or invalid with the reason. */
export type CheckedRecord = Pick<CommitOp, 'collection' | 'rkey' | 'cid' | 'record' | 'checked'>

export interface DecodedRepo extends Omit<ReadRepo, 'records'> {
  records: CheckedRecord[]
  /** Which reader read it: the fast one, or the reference (an odd or refused CAR). */
  reader: 'fast' | 'reference'
}

export interface DecodeRequest {
  did: string
  /** The DID document's key when verifying; undefined: trusted. */
  signingKey: string | undefined
  /** The reference reader's memory before it spills blocks to a file. */
  memoryBytes: number
}

/** The repo read and checked; throws RepoCarError for a CAR that is refused. */
export async function decodeRepo(bytes: Uint8Array, req: DecodeRequest): Promise<DecodedRepo> {
  const fast = readRepoFast(bytes, req)
  const read = fast ?? (await readReference(bytes, req))
  const ops: CommitOp[] = []
  for (const r of read.records) {
    if (!pluginFor(r.collection)) continue
    ops.push({ action: 'create', ...r })
  }
  const evt: Extract<IngestEvent, { type: 'commit' }> = {
    type: 'commit',
    seq: 0,
    time: '',
    did: read.did,
    commit: read.commit,
    rev: read.rev,
    ops,
  }
  checkRecords(evt)
  const records = ops.map(({ collection, rkey, cid, record, checked }) =>
    checked && 'invalid' in checked
      ? { collection, rkey, cid, checked }
      : { collection, rkey, cid, record, checked },
  )
  return { ...read, records, reader: fast ? 'fast' : 'reference' }
}

async function readReference(bytes: Uint8Array, req: DecodeRequest): Promise<ReadRepo> {
  const car = await readRepoCar(
    (async function* () {
      yield bytes
    })(),
    req,
  )
  try {
    const bad: ReadRepo['bad'] = []
    const records: ReadRepo['records'] = []
    for await (const r of car.records((key, reason) => bad.push({ key, reason }))) {
      records.push({ collection: r.collection, rkey: r.rkey, cid: r.cid, record: r.record })
    }
    return { did: car.did, rev: car.rev, commit: car.commit, bytes: bytes.length, records, bad }
  } finally {
    await car.close()
  }
}
