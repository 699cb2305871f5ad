// What a consumer asks for, as Jetstream (v1 `/subscribe`) reads it: `wantedCollections` (NSIDs,
// or a prefix ending in `.*`; at most 100), `wantedDids` (at most 10,000), `maxMessageSizeBytes`
// (0 or anything unreadable: no limit), from the query string or an `options_update` message. The
// DID filter applies to every message; the collection filter to commits only — identity and
// account messages reach every consumer that wants their DID.

export const MAX_COLLECTIONS = 100
export const MAX_DIDS = 10_000

export interface Filter {
  /** Exact collections; undefined with no prefixes either: every collection. */
  collections: Set<string> | undefined
  prefixes: string[]
  dids: Set<string> | undefined
  /** Largest message (JSON bytes) to send; 0: no limit. */
  maxMessageBytes: number
  /** The same for filters that want the same messages: consumers with one key share bytes. */
  key: string
}

export class FilterError extends Error {}

const NSID = /^[a-zA-Z]([a-zA-Z0-9-]{0,62})?(\.[a-zA-Z0-9]([a-zA-Z0-9-]{0,62})?)+$/
const NSID_PREFIX = /^[a-zA-Z0-9-]+(\.[a-zA-Z0-9-]+)*\.$/
const DID = /^did:[a-z]+:[a-zA-Z0-9._:%-]*[a-zA-Z0-9._-]$/

export function makeFilter(opts: {
  collections?: readonly string[]
  dids?: readonly string[]
  maxMessageBytes?: number
}): Filter {
  const exact = new Set<string>()
  const prefixes = new Set<string>()
  for (const c of opts.collections ?? []) {
    if (c.endsWith('.*')) {
      const head = c.slice(0, -1)
      if (!NSID_PREFIX.test(head)) throw new FilterError(`invalid collection prefix: ${c}`)
      prefixes.add(head)
    } else {
      if (!NSID.test(c) || c.length > 317) throw new FilterError(`invalid collection: ${c}`)
      exact.add(c)
    }
  }
  if (exact.size + prefixes.size > MAX_COLLECTIONS) {
    throw new FilterError(`too many collections: at most ${MAX_COLLECTIONS}`)
  }
  const dids = new Set<string>()
  for (const d of opts.dids ?? []) {
    if (!DID.test(d) || d.length > 2048) throw new FilterError(`invalid DID: ${d}`)
    dids.add(d)
  }
  if (dids.size > MAX_DIDS) throw new FilterError(`too many DIDs: at most ${MAX_DIDS}`)
  const any = !exact.size && !prefixes.size
  const max = opts.maxMessageBytes
  const maxMessageBytes = max && Number.isSafeInteger(max) && max > 0 ? max : 0
  const sorted = (s: Set<string>) => [...s].sort().join(',')
  return {
    collections: any ? undefined : exact,
    prefixes: [...prefixes],
    dids: dids.size ? dids : undefined,
    maxMessageBytes,
    key: `${sorted(exact)}|${sorted(prefixes)}|${sorted(dids)}|${maxMessageBytes}`,
  }
}

/** The filter a query string asks for. Throws FilterError. */
export function filterFromQuery(query: URLSearchParams): Filter {
  const max = query.get('maxMessageSizeBytes')
  return makeFilter({
    collections: query.getAll('wantedCollections'),
    dids: query.getAll('wantedDids'),
    maxMessageBytes: max && /^\d+$/.test(max) ? Number(max) : 0,
  })
}

/**
 * A consumer's message: the filter an `options_update` asks for, or undefined for a message of
 * another type (ignored, as Jetstream does). Throws FilterError for a malformed update.
 */
export function filterFromMessage(text: string): Filter | undefined {
  let msg: unknown
  try {
    msg = JSON.parse(text)
  } catch {
    throw new FilterError('message is not JSON')
  }
  if (!msg || typeof msg !== 'object') throw new FilterError('message is not an object')
  const { type, payload } = msg as { type?: unknown; payload?: unknown }
  if (type !== 'options_update') return undefined
  if (!payload || typeof payload !== 'object') throw new FilterError('options_update: no payload')
  const p = payload as Record<string, unknown>
  const strings = (name: string): string[] => {
    const v = p[name]
    if (v === undefined || v === null) return []
    if (!Array.isArray(v) || !v.every((s) => typeof s === 'string')) {
      throw new FilterError(`options_update: ${name} must be a list of strings`)
    }
    return v as string[]
  }
  const max = p.maxMessageSizeBytes
  return makeFilter({
    collections: strings('wantedCollections'),
    dids: strings('wantedDids'),
    maxMessageBytes: typeof max === 'number' ? max : 0,
  })
}

/** Whether a message of this DID and collection (null: identity, account) passes the filter. */
export function wants(f: Filter, did: string, collection: string | null, bytes: number): boolean {
  if (f.dids && !f.dids.has(did)) return false
  if (f.maxMessageBytes && bytes > f.maxMessageBytes) return false
  if (collection === null || !f.collections) return true
  if (f.collections.has(collection)) return true
  for (const p of f.prefixes) if (collection.startsWith(p)) return true
  return false
}
