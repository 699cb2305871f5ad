// What a failed identity lookup means for the caller. A DID whose method no resolver handles, or
// whose document is malformed or gone, has no identity to find: not found, for good. Anything
// else (a did:web host or PLC that does not answer, a timeout) may pass: unavailable, worth
// asking again later. Neither is the server's own fault.
import {
  DidNotFoundError,
  PoorlyFormattedDidDocumentError,
  PoorlyFormattedDidError,
  UnsupportedDidMethodError,
  UnsupportedDidWebPathError,
} from '@atproto/identity'

export function lookupFailure(err: unknown): 'not_found' | 'unavailable' {
  return err instanceof DidNotFoundError ||
    err instanceof PoorlyFormattedDidError ||
    err instanceof PoorlyFormattedDidDocumentError ||
    err instanceof UnsupportedDidMethodError ||
    err instanceof UnsupportedDidWebPathError
    ? 'not_found'
    : 'unavailable'
}
