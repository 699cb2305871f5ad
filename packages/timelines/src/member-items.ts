// A page's members as the uris GetTimeline answers, written as bytes straight from the members.
// The answer of every home timeline page carries each item's post uri and repost uri; making them
// as strings (memberUris) was the largest allocation of a read, about 330 bytes an item, all
// garbage once the answer's frame is written. Here each uri's length is worked out from the
// member and its bytes copied from it, so a page's answer costs one small index and no strings.
// The bytes are exactly memberUris's strings (a test holds them equal): members are printable
// ASCII (encodeMember checks), so a character is a byte, in latin1 as in UTF-8.
import { expandUri, memberUris, REPOST_SEP, SEP } from './member.ts'

const AT = 'at://'
const PLC = 'did:plc:'
const POST_PATH = '/app.bsky.feed.post/'
const REPOST_PATH = '/app.bsky.feed.repost/'

/** How a stored uri field becomes the answer's uri. */
const VERBATIM = 0 // a whole at:// uri, kept as it was
const DID = 1 // `did:…/R`: at://, the field to its slash, the collection path, the rkey
const PLC_ID = 2 // `X/R`: the same with did:plc: before X
const ODD = 3 // no slash: expandUri's own answer, made as a string (encodeMember never writes one)

/** Fields per item in the index: post start, end, kind, slash; repost start, end, kind, slash. */
const STRIDE = 8

export class MemberItems {
  readonly length: number
  readonly #members: readonly string[]
  readonly #at: Int32Array
  /** ODD fields' strings, by their index slot; almost always empty. */
  #odd: Map<number, string> | undefined

  constructor(members: readonly string[]) {
    this.#members = members
    this.length = members.length
    this.#at = new Int32Array(members.length * STRIDE)
    for (let i = 0; i < members.length; i++) {
      const m = members[i]!
      const b = m.indexOf(SEP, m.indexOf(SEP) + 1) + 1
      const r = m.indexOf(REPOST_SEP, b)
      const slot = i * STRIDE
      if (r < 0) {
        this.#field(i, slot, b, m.length, POST_PATH)
        this.#at[slot + 6] = -1
      } else {
        this.#field(i, slot, b, r, POST_PATH)
        this.#field(i, slot + 4, r + 1, m.length, REPOST_PATH)
      }
    }
  }

  #field(i: number, slot: number, start: number, end: number, path: string): void {
    const m = this.#members[i]!
    const at = this.#at
    at[slot] = start
    at[slot + 1] = end
    if (m.startsWith(AT, start)) {
      at[slot + 2] = VERBATIM
      return
    }
    const slash = m.lastIndexOf('/', end - 1)
    if (slash < start) {
      at[slot + 2] = ODD
      ;(this.#odd ??= new Map()).set(slot, expandUri(m.slice(start, end), collectionOf(path)))
      return
    }
    at[slot + 2] = m.startsWith('did:', start) ? DID : PLC_ID
    at[slot + 3] = slash
  }

  /** Bytes of item i's post uri. */
  uriSize(i: number): number {
    return this.#size(i * STRIDE, POST_PATH)
  }

  /** Bytes of item i's repost uri; 0 for a post. */
  repostSize(i: number): number {
    return this.#size(i * STRIDE + 4, REPOST_PATH)
  }

  /** Writes item i's post uri into `buf` at `at`; returns where it ends. */
  writeUri(i: number, buf: Uint8Array, at: number): number {
    return this.#write(i, i * STRIDE, POST_PATH, buf, at)
  }

  /** Writes item i's repost uri (nothing for a post); returns where it ends. */
  writeRepost(i: number, buf: Uint8Array, at: number): number {
    return this.#write(i, i * STRIDE + 4, REPOST_PATH, buf, at)
  }

  /** The items as strings, as memberUris makes them. */
  toArray(): { uri: string; repost: string }[] {
    return this.#members.map(memberUris)
  }

  #size(slot: number, path: string): number {
    const at = this.#at
    const start = at[slot]!
    const end = at[slot + 1]!
    switch (at[slot + 2]) {
      case VERBATIM:
        return end - start
      case DID:
        // at:// + did + path + rkey: the field is did, slash, rkey.
        return AT.length + (end - start) - 1 + path.length
      case PLC_ID:
        return AT.length + PLC.length + (end - start) - 1 + path.length
      case ODD:
        return this.#odd!.get(slot)!.length
      default: // no repost
        return 0
    }
  }

  #write(i: number, slot: number, path: string, buf: Uint8Array, to: number): number {
    const at = this.#at
    const m = this.#members[i]!
    const start = at[slot]!
    const end = at[slot + 1]!
    switch (at[slot + 2]) {
      case VERBATIM:
        return copy(m, start, end, buf, to)
      case DID:
      case PLC_ID: {
        const slash = at[slot + 3]!
        to = copy(AT, 0, AT.length, buf, to)
        if (at[slot + 2] === PLC_ID) to = copy(PLC, 0, PLC.length, buf, to)
        to = copy(m, start, slash, buf, to)
        to = copy(path, 0, path.length, buf, to)
        return copy(m, slash + 1, end, buf, to)
      }
      case ODD: {
        const s = this.#odd!.get(slot)!
        return copy(s, 0, s.length, buf, to)
      }
      default:
        return to
    }
  }
}

/** `/app.bsky.feed.post/` → `app.bsky.feed.post`. */
const collectionOf = (path: string): string => path.slice(1, -1)

/** Characters start..end of an ASCII string as bytes, without making a substring. */
function copy(s: string, start: number, end: number, buf: Uint8Array, to: number): number {
  for (let k = start; k < end; k++) buf[to++] = s.charCodeAt(k)
  return to
}
