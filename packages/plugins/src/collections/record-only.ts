// Collections the stock keeps only in `record` (read back by GetActors and the Get*Records rpcs).
import { assertRecord } from '../lexicon.ts'
import type { RecordPlugin } from '../types.ts'

const recordOnly = (collection: string): RecordPlugin<unknown, never> => ({
  collection,
  table: null,
  parse: (record) => assertRecord(collection, record),
  toRow: () => {
    throw new Error(`${collection} has no table`)
  },
  onInsert: () => ({}),
  onDelete: () => ({}),
})

export const chatDeclaration = recordOnly('chat.bsky.actor.declaration')
export const germDeclaration = recordOnly('com.germnetwork.declaration')
export const notificationDeclaration = recordOnly('app.bsky.notification.declaration')
export const status = recordOnly('app.bsky.actor.status')
