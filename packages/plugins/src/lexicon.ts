// Lexicon validation of firehose records against the app.bsky (and related) schemas that
// @atproto/api ships. Records arrive in the lex data model; the validator wants its own.
import { lexicons } from '@atproto/api'
import { jsonToLex } from '@atproto/lexicon'
import { lexToJson } from '@atproto/lex-json'

type LexValue = Parameters<typeof lexToJson>[0]

export class InvalidRecordError extends Error {}

/** Throws InvalidRecordError unless `record` is a valid `nsid` record. Returns it typed. */
export function assertRecord<T>(nsid: string, record: unknown): T {
  try {
    const value = jsonToLex(lexToJson(record as LexValue) as never)
    lexicons.assertValidRecord(nsid, value)
  } catch (err) {
    throw new InvalidRecordError(`invalid ${nsid} record: ${(err as Error).message}`)
  }
  return record as T
}
