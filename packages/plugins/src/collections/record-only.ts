// Collections the stock keeps only in `record` (read back by GetActors and the Get*Records rpcs).
import { assertRecord } from '../lexicon.ts'
import type { RecordPlugin } from '../types.ts'

const recordOnly = (collection: string, validate = true): RecordPlugin<unknown, never> => ({
  collection,
  table: null,
  parse: (record) => (validate ? assertRecord(collection, record) : record),
  toRow: () => {
    throw new Error(`${collection} has no table`)
  },
  onInsert: () => ({}),
  onDelete: () => ({}),
})

// The stock switches the lexicon check off for chat declarations (its plugin's
// assertValidRecord returns null): whatever the repo holds is kept.
export const chatDeclaration = recordOnly('chat.bsky.actor.declaration', false)
export const germDeclaration = recordOnly('com.germnetwork.declaration')
export const notificationDeclaration = recordOnly('app.bsky.notification.declaration')
export const status = recordOnly('app.bsky.actor.status')
