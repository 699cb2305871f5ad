// Where lists are rebuilt from: Postgres, through the same queries the fan-in path runs. Passed
// in so this package does not own SQL the server also answers with.
import type { FeedRow } from '@openplane/timelines'

export interface FeedSource {
  /** Newest feed items of everyone `reader` follows (the stock's fan-in query, no cursor). */
  followed(reader: string, rows: number): Promise<FeedRow[]>
  /** Newest feed items originated by `author` (its posts and reposts). */
  byAuthor(author: string, rows: number): Promise<FeedRow[]>
}
