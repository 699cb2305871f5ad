import type { AppBskyFeedThreadgate } from '@atproto/api'
import { gatePlugin } from './gate.ts'

export const threadGate = gatePlugin<AppBskyFeedThreadgate.Record, 'thread_gate'>({
  collection: 'app.bsky.feed.threadgate',
  table: 'thread_gate',
  flag: 'hasThreadGate',
  label: 'thread gate',
})
