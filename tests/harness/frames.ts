// Crafting subscribeRepos frames for tests: real CBOR frames with CAR-encoded records, plus
// helpers to break them in specific ways.
import { cidForLex, encode } from '@atproto/lex-cbor'

type Lex = Parameters<typeof encode>[0]

export function frame(header: Lex, body: Lex): Uint8Array {
  const h = encode(header)
  const b = encode(body)
  const out = new Uint8Array(h.length + b.length)
  out.set(h)
  out.set(b, h.length)
  return out
}

function varint(n: number): number[] {
  const out: number[] = []
  while (n >= 0x80) {
    out.push((n & 0x7f) | 0x80)
    n >>>= 7
  }
  out.push(n)
  return out
}

/** A CARv1 file: header with one root, then the given blocks. */
export function car(
  root: { bytes: Uint8Array },
  blocks: { cid: { bytes: Uint8Array }; bytes: Uint8Array }[],
): Uint8Array {
  const parts: number[] = []
  const header = encode({ version: 1, roots: [root] } as unknown as Lex)
  parts.push(...varint(header.length), ...header)
  for (const b of blocks) {
    parts.push(...varint(b.cid.bytes.length + b.bytes.length), ...b.cid.bytes, ...b.bytes)
  }
  return new Uint8Array(parts)
}

export interface CraftOp {
  action: 'create' | 'update' | 'delete'
  collection: string
  rkey: string
  record?: Record<string, unknown>
  /** Leave the record block out of the CAR (a broken commit). */
  omitBlock?: boolean
}

/** A #commit frame whose CAR holds the op records (no MST: trusted-relay parsing needs none). */
export async function commitFrame(
  seq: number,
  did: string,
  ops: CraftOp[],
  time = new Date().toISOString(),
  /** A TID rev, as real commits carry (the stock's lexicon check wants one); default `rev<seq>`. */
  rev = `rev${seq}`,
) {
  const blocks: { cid: { bytes: Uint8Array }; bytes: Uint8Array }[] = []
  const wireOps: Lex[] = []
  for (const op of ops) {
    if (op.action === 'delete') {
      wireOps.push({ action: 'delete', path: `${op.collection}/${op.rkey}`, cid: null } as Lex)
      continue
    }
    const bytes = encode(op.record as Lex)
    const cid = await cidForLex(op.record as Lex)
    if (!op.omitBlock) blocks.push({ cid, bytes })
    wireOps.push({ action: op.action, path: `${op.collection}/${op.rkey}`, cid } as unknown as Lex)
  }
  const commitObj = { did, version: 3, rev, prev: null, data: { seq } }
  const commitCid = await cidForLex(commitObj as Lex)
  blocks.push({ cid: commitCid, bytes: encode(commitObj as Lex) })
  return frame({ op: 1, t: '#commit' }, {
    seq,
    rebase: false,
    tooBig: false,
    repo: did,
    commit: commitCid,
    rev,
    since: null,
    blocks: car(commitCid, blocks),
    ops: wireOps,
    blobs: [],
    time,
  } as unknown as Lex)
}
