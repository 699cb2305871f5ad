// The bsync.Service contract as pinned by @atproto/bsky (see proto/bsync.proto): the client side
// only, for tailing bsync's operation streams.
export * from './gen/bsync_pb.js'
export { Service as BsyncService } from './gen/bsync_connect.js'
