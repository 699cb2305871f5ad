import type { AppBskyFeedPostgate } from '@atproto/api'
import { gatePlugin } from './gate.ts'

export const postGate = gatePlugin<AppBskyFeedPostgate.Record, 'post_gate'>({
  collection: 'app.bsky.feed.postgate',
  table: 'post_gate',
  flag: 'hasPostGate',
  label: 'post gate',
})
