// The slice of @atproto/syntax's AtUri the routes need: the same accept/reject decisions (so a
// uri the stock refuses is refused here too) and the same collection/rkey extraction.
import { Code, ConnectError } from '@connectrpc/connect'

// proto, host (did or handle-ish), path, query, hash: the stock's ATP_URI_REGEX.
const AT_URI =
  /^(at:\/\/)?((?:did:[a-z0-9:%-]+)|(?:[a-z0-9][a-z0-9.:-]*))(\/[^?#\s]*)?(\?[^#\s]+)?(#[^\s]+)?$/i
const DID = /^did:[a-z]+:[a-zA-Z0-9._:%-]*[a-zA-Z0-9._-]$/
const HANDLE =
  /^([a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?\.)+[a-zA-Z]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?$/

export interface AtUriParts {
  host: string
  collection: string
  rkey: string
}

/** Parses an at:// uri; undefined when the stock's AtUri constructor would throw. */
export function parseAtUri(uri: string): AtUriParts | undefined {
  const match = AT_URI.exec(uri)
  const host = match?.[2]
  if (!match || !host || !isAtIdentifier(host)) return undefined
  const segments = (match[3] ?? '').split('/').filter(Boolean)
  return { host, collection: segments[0] ?? '', rkey: segments[1] ?? '' }
}

/** The collection of a uri the caller sent; a malformed uri is the caller's error. */
export function collectionOf(uri: string): string {
  const parts = parseAtUri(uri)
  if (!parts) throw new ConnectError(`invalid at uri: ${uri}`, Code.InvalidArgument)
  return parts.collection
}

/** A syntactically valid DID, as @atproto/syntax's ensureValidDid decides. */
export function isDid(id: string): boolean {
  return id.length <= 2048 && DID.test(id)
}

function isAtIdentifier(id: string): boolean {
  if (id.startsWith('did:')) return isDid(id)
  return id.length <= 253 && HANDLE.test(id)
}
