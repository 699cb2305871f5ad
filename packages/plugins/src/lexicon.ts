// Lexicon validation of firehose records against the app.bsky (and related) schemas that
// @atproto/api ships, with the validators the stock indexer uses: @atproto/lex-schema's, built
// here from the lexicon documents (@atproto/lex-document) once, when this module loads (about
// 20 ms). The stock checks each record with the same engine (`schema.check`), so its string
// formats (datetimes with a zone, CIDs, languages, …) judge a record exactly as the stock's do;
// records arrive in the same data model it checks (@atproto/lex-data: CIDs and bytes as such).
import { schemas } from '@atproto/api'
import { LexiconIterableIndexer, LexiconSchemaBuilder } from '@atproto/lex-document'

export class InvalidRecordError extends Error {}

interface RecordValidator {
  check(value: unknown): void
}

/**
 * @atproto/api's documents name refs as `lex:<nsid>#<def>` (or `lex:<nsid>` for `main`); the
 * builder takes `<nsid>#<def>`.
 */
function ref(value: string): string {
  const bare = value.replace(/^lex:/, '')
  return bare.includes('#') ? bare : `${bare}#main`
}

function normalized(value: unknown, key = ''): unknown {
  if (typeof value === 'string') return key === 'ref' ? ref(value) : value.replace(/^lex:/, '')
  if (Array.isArray(value)) {
    return value.map((v) => (key === 'refs' && typeof v === 'string' ? ref(v) : normalized(v)))
  }
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, normalized(v, k)]))
  }
  return value
}

async function recordValidators(): Promise<Map<string, RecordValidator>> {
  const docs = (schemas as unknown[]).map((d) => normalized(d)) as {
    id: string
    defs: { main?: { type?: string } }
  }[]
  const indexer = new LexiconIterableIndexer(docs as never)
  const built = new Map<string, RecordValidator>()
  for (const doc of docs) {
    if (doc.defs.main?.type !== 'record') continue
    built.set(doc.id, (await LexiconSchemaBuilder.build(indexer, `${doc.id}#main`)) as never)
  }
  return built
}

const validators = await recordValidators()

/** Throws InvalidRecordError unless `record` is a valid `nsid` record. Returns it typed. */
export function assertRecord<T>(nsid: string, record: unknown): T {
  const validator = validators.get(nsid)
  if (!validator) throw new InvalidRecordError(`no lexicon for ${nsid} records`)
  try {
    validator.check(record)
  } catch (err) {
    throw new InvalidRecordError(`invalid ${nsid} record: ${(err as Error).message}`)
  }
  return record as T
}
