// Lexicon validation of firehose records against the app.bsky (and related) schemas that
// @atproto/api ships. Records arrive in the lex data model; the validator wants its own.
import { lexicons } from '@atproto/api'
import { jsonToLex } from '@atproto/lexicon'
import { lexToJson } from '@atproto/lex-json'

type LexValue = Parameters<typeof lexToJson>[0]

export class InvalidRecordError extends Error {}

/** Throws InvalidRecordError unless `record` is a valid `nsid` record. Returns it typed. */
export function assertRecord<T>(nsid: string, record: unknown): T {
  // The JSON round trip below would turn a CBOR map shaped like JSON's encoding of a link or of
  // bytes into a real one; in the data model it is just a map, and the stock refuses it where a
  // link or bytes belong (a blob whose ref is `{ $link }`).
  const mimic = jsonShapedValue(record)
  if (mimic)
    throw new InvalidRecordError(`invalid ${nsid} record: ${mimic} is a map, not a link or bytes`)
  try {
    const value = jsonToLex(lexToJson(record as LexValue) as never)
    lexicons.assertValidRecord(nsid, value)
  } catch (err) {
    throw new InvalidRecordError(`invalid ${nsid} record: ${(err as Error).message}`)
  }
  return record as T
}

/** The path of a map with a lone `$link` or `$bytes` key, if the value holds one. */
function jsonShapedValue(value: unknown, path = 'Record'): string | undefined {
  if (!value || typeof value !== 'object' || value instanceof Uint8Array) return undefined
  if (Array.isArray(value)) {
    for (const [i, v] of value.entries()) {
      const found = jsonShapedValue(v, `${path}/${i}`)
      if (found) return found
    }
    return undefined
  }
  // A CID decoded from CBOR is a class instance, never a plain map.
  const proto = Object.getPrototypeOf(value) as unknown
  if (proto !== Object.prototype && proto !== null) return undefined
  const keys = Object.keys(value)
  if (keys.length === 1 && (keys[0] === '$link' || keys[0] === '$bytes')) return path
  for (const [k, v] of Object.entries(value)) {
    const found = jsonShapedValue(v, `${path}/${k}`)
    if (found) return found
  }
  return undefined
}
