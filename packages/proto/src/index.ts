// The bsky.Service contract as pinned by @atproto/bsky (see proto/bsky.proto and scripts/codegen.ts).
export * from './gen/bsky_pb.js'
export { Service } from './gen/bsky_connect.js'
