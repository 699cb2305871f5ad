// A fuzz sequence as subscribeRepos frames: commits with their records in a CAR (trusted-relay
// parsing, as the stock runs, needs no MST), identity, account and sync messages. Both indexers
// receive exactly these bytes.
import { cidForLex, encode as encodeCbor } from '@atproto/lex-cbor'
import { tid } from '@openplane/sim'
import { car, commitFrame, frame } from '../frames.ts'
import { didOf, eventTimes, records, segmentsOf, type FuzzEvent, type Segment } from './sequence.ts'

export interface EncodedSequence {
  frames: { seq: number; bytes: Uint8Array }[]
  /** Runs of events that see one world; a batch of ours never spans two. */
  segments: Segment[]
}

type Lex = Parameters<typeof frame>[0]

export async function encode(seq: FuzzEvent[], firstSeq: number): Promise<EncodedSequence> {
  const times = eventTimes(seq)
  const recs = await records(seq)
  const frames: EncodedSequence['frames'] = []
  for (const [i, e] of seq.entries()) {
    const n = firstSeq + i
    const time = times[i]!
    const did = didOf(e.by)
    const rev = tid(Date.parse(time) * 1000 + i, 0)
    let bytes: Uint8Array
    if ('ops' in e) {
      bytes = await commitFrame(n, did, recs[i]!, time, rev)
    } else if ('identity' in e) {
      const body: Record<string, unknown> = { seq: n, did, time }
      if (e.identity.handle) body.handle = e.identity.handle
      bytes = frame({ op: 1, t: '#identity' } as Lex, body as Lex)
    } else if ('account' in e) {
      const body: Record<string, unknown> = { seq: n, did, time, active: e.account === 'active' }
      if (e.account !== 'active') body.status = e.account
      bytes = frame({ op: 1, t: '#account' } as Lex, body as Lex)
    } else {
      const commit = { did, version: 3, rev, prev: null, data: { seq: n } }
      const cid = await cidForLex(commit as Lex)
      bytes = frame(
        { op: 1, t: '#sync' } as Lex,
        {
          seq: n,
          did,
          rev,
          time,
          blocks: car(cid, [{ cid, bytes: encodeCbor(commit as Lex) }]),
        } as unknown as Lex,
      )
    }
    frames.push({ seq: n, bytes })
  }
  return { frames, segments: segmentsOf(seq) }
}
