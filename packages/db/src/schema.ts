// Kysely types for every table of the stock dataplane schema (@atproto/bsky 0.0.280), named and
// typed after what Postgres actually holds (the stock's own TS types drift from it in places, e.g.
// `post_embed_image.position` is varchar there and number in the stock types), plus our additive
// tables. Timestamps in stock tables are ISO strings in varchar columns, never timestamptz.
// Long because the stock schema is: one interface per table, kept together as the one place that
// says what Postgres holds.
import type { ColumnType, Generated, GeneratedAlways } from 'kysely'

/** bigint: both drivers parse int8 to a JS number (as the stock does); writes accept any form. */
export type Int8 = ColumnType<number, number | bigint | string, number | bigint | string>
/** bigint with a default (the aggregate counters). */
export type Int8Default = ColumnType<
  number,
  number | bigint | string | undefined,
  number | bigint | string
>
/** jsonb: read back parsed; written as JSON text, since pg would send JS arrays as pg arrays. */
export type Json<T> = ColumnType<T, string, string>
export type NullableJson<T> = ColumnType<T | null, string | null | undefined, string | null>
/** varchar holding a number in the stock (embed image positions). */
export type NumericText = ColumnType<string, string | number, string | number>
/** A materialized view column: readable, never writable. */
export type ReadOnly<T> = ColumnType<T, never, never>

export type JsonObject = { [key: string]: unknown }

export interface ActivitySubscription {
  creator: string
  subjectDid: string
  key: string
  indexedAt: string
  post: boolean
  reply: boolean
}

export interface Actor {
  did: string
  handle: string | null
  indexedAt: string
  takedownRef: string | null
  upstreamStatus: string | null
  trustedVerifier: Generated<boolean>
  ageAssuranceStatus: string | null
  ageAssuranceLastInitiatedAt: string | null
  ageAssuranceAccess: string | null
  ageAssuranceCountryCode: string | null
  ageAssuranceRegionCode: string | null
}

export interface ActorBlock {
  uri: string
  cid: string
  creator: string
  subjectDid: string
  createdAt: string
  indexedAt: string
  sortAt: GeneratedAlways<string>
}

export interface ActorState {
  did: string
  lastSeenNotifs: string
  priorityNotifs: Generated<boolean>
}

export interface ActorSync {
  did: string
  commitCid: string
  repoRev: string | null
}

/** Materialized view behind the legacy "what's hot" feed; refreshed, never written. */
export interface AlgoWhatsHotView {
  uri: ReadOnly<string>
  cid: ReadOnly<string>
  /** numeric, which pg returns as a string */
  score: ReadOnly<string>
}

export interface BlobTakedown {
  did: string
  cid: string
  takedownRef: string
}

export interface Bookmark {
  creator: string
  key: string
  subjectUri: string
  subjectCid: string
  indexedAt: string
}

export interface DidCache {
  did: string
  doc: Json<JsonObject>
  /** epoch milliseconds */
  updatedAt: Int8
}

export interface Draft {
  creator: string
  key: string
  createdAt: string
  updatedAt: string
  payload: string
}

export interface DuplicateRecord {
  uri: string
  cid: string
  duplicateOf: string
  indexedAt: string
}

export interface FeedGenerator {
  uri: string
  cid: string
  creator: string
  feedDid: string
  displayName: string | null
  description: string | null
  descriptionFacets: string | null
  avatarCid: string | null
  createdAt: string
  indexedAt: string
  sortAt: GeneratedAlways<string>
}

export interface FeedItem {
  uri: string
  cid: string
  type: 'post' | 'repost'
  postUri: string
  originatorDid: string
  sortAt: string
}

export interface Follow {
  uri: string
  cid: string
  creator: string
  subjectDid: string
  createdAt: string
  indexedAt: string
  sortAt: GeneratedAlways<string>
}

export interface Label {
  src: string
  uri: string
  cid: string
  val: string
  neg: boolean
  cts: string
  exp: string | null
}

export interface Labeler {
  uri: string
  cid: string
  creator: string
  createdAt: string
  indexedAt: string
  sortAt: GeneratedAlways<string>
}

export interface Like {
  uri: string
  cid: string
  creator: string
  subject: string
  subjectCid: string
  createdAt: string
  indexedAt: string
  sortAt: GeneratedAlways<string>
  via: string | null
  viaCid: string | null
}

export interface List {
  uri: string
  cid: string
  creator: string
  name: string
  purpose: string
  description: string | null
  descriptionFacets: string | null
  avatarCid: string | null
  createdAt: string
  indexedAt: string
  sortAt: GeneratedAlways<string>
}

export interface ListBlock {
  uri: string
  cid: string
  creator: string
  subjectUri: string
  createdAt: string
  indexedAt: string
  sortAt: GeneratedAlways<string>
}

export interface ListItem {
  uri: string
  cid: string
  creator: string
  subjectDid: string
  listUri: string
  createdAt: string
  indexedAt: string
  sortAt: GeneratedAlways<string>
}

export interface ListMute {
  listUri: string
  mutedByDid: string
  createdAt: string
}

// The moderation_* tables are legacy: moderation moved to Ozone and the stock no longer reads or
// writes them, but its migrations still create them, so the schema must hold them.

export interface ModerationAction {
  id: Generated<number>
  action: string
  subjectType: string
  subjectDid: string
  subjectUri: string | null
  subjectCid: string | null
  reason: string
  createdAt: string
  createdBy: string
  reversedAt: string | null
  reversedBy: string | null
  reversedReason: string | null
  createLabelVals: string | null
  negateLabelVals: string | null
  durationInHours: number | null
  expiresAt: string | null
}

export interface ModerationActionSubjectBlob {
  actionId: number
  cid: string
}

export interface ModerationEvent {
  id: Generated<number>
  action: string
  subjectType: string
  subjectDid: string
  subjectUri: string | null
  subjectCid: string | null
  comment: string | null
  meta: NullableJson<JsonObject>
  createdAt: string
  createdBy: string
  reversedAt: string | null
  reversedBy: string | null
  durationInHours: number | null
  expiresAt: string | null
  reversedReason: string | null
  createLabelVals: string | null
  negateLabelVals: string | null
  legacyRefId: number | null
}

export interface ModerationReport {
  id: Generated<number>
  subjectType: string
  subjectDid: string
  subjectUri: string | null
  subjectCid: string | null
  reasonType: string
  reason: string | null
  reportedByDid: string
  createdAt: string
}

export interface ModerationReportResolution {
  reportId: number
  actionId: number
  createdBy: string
  createdAt: string
}

export interface ModerationSubjectStatus {
  id: Generated<number>
  did: string
  recordPath: Generated<string>
  blobCids: NullableJson<string[]>
  recordCid: string | null
  reviewState: string
  comment: string | null
  muteUntil: string | null
  lastReviewedAt: string | null
  lastReviewedBy: string | null
  lastReportedAt: string | null
  takendown: Generated<boolean>
  suspendUntil: string | null
  createdAt: string
  updatedAt: string
}

export interface Mute {
  subjectDid: string
  mutedByDid: string
  createdAt: string
  onlyReposts: Generated<boolean>
  onlyQuoteposts: Generated<boolean>
}

export interface Notification {
  /** bigserial */
  id: Generated<number>
  did: string
  recordUri: string
  recordCid: string
  author: string
  reason: string
  reasonSubject: string | null
  sortAt: string
}

export interface NotificationPushToken {
  did: string
  platform: string
  token: string
  appId: string
}

export interface OpThreadReply {
  rootUri: string
  parentUri: string
  uri: string
  deletedAt: string | null
}

export interface Post {
  uri: string
  cid: string
  creator: string
  text: string
  replyRoot: string | null
  replyRootCid: string | null
  replyParent: string | null
  replyParentCid: string | null
  createdAt: string
  indexedAt: string
  sortAt: GeneratedAlways<string>
  langs: NullableJson<string[]>
  invalidReplyRoot: boolean | null
  violatesThreadGate: boolean | null
  tags: NullableJson<string[]>
  violatesEmbeddingRules: boolean | null
  hasThreadGate: boolean | null
  hasPostGate: boolean | null
}

export interface PostAgg {
  uri: string
  likeCount: Int8Default
  replyCount: Int8Default
  repostCount: Int8Default
  quoteCount: Int8Default
  bookmarkCount: Int8Default
}

export interface PostEmbedExternal {
  postUri: string
  uri: string
  title: string
  description: string
  thumbCid: string | null
}

export interface PostEmbedGalleryImage {
  postUri: string
  position: NumericText
  imageCid: string
  alt: string
}

export interface PostEmbedImage {
  postUri: string
  position: NumericText
  imageCid: string
  alt: string
}

export interface PostEmbedRecord {
  postUri: string
  embedUri: string
  embedCid: string
}

export interface PostEmbedVideo {
  postUri: string
  videoCid: string
  alt: string | null
}

export interface PostGate {
  uri: string
  cid: string
  creator: string
  postUri: string
  createdAt: string
  indexedAt: string
}

export interface PrivateData {
  actorDid: string
  namespace: string
  key: string
  payload: string
  indexedAt: string
  updatedAt: string
}

export interface Profile {
  uri: string
  cid: string
  creator: string
  displayName: string | null
  description: string | null
  avatarCid: string | null
  bannerCid: string | null
  indexedAt: string
  joinedViaStarterPackUri: string | null
  createdAt: string
  pinnedPost: string | null
  pinnedPostCid: string | null
}

export interface ProfileAgg {
  did: string
  followersCount: Int8Default
  followsCount: Int8Default
  postsCount: Int8Default
}

export interface Quote {
  uri: string
  cid: string
  subject: string
  subjectCid: string
  createdAt: string
  indexedAt: string
  sortAt: GeneratedAlways<string>
}

/** The raw record of every indexed repo record, by uri. */
export interface RepoRecord {
  uri: string
  cid: string
  did: string
  json: string
  indexedAt: string
  takedownRef: string | null
  tags: NullableJson<string[]>
}

export interface ReferenceListOptOut {
  uri: string
  cid: string
  creator: string
  subjectUri: string
  createdAt: string
  indexedAt: string
  sortAt: GeneratedAlways<string>
}

export interface Repost {
  uri: string
  cid: string
  creator: string
  subject: string
  subjectCid: string
  createdAt: string
  indexedAt: string
  sortAt: GeneratedAlways<string>
  via: string | null
  viaCid: string | null
}

export interface StarterPack {
  uri: string
  cid: string
  creator: string
  createdAt: string
  indexedAt: string
  sortAt: GeneratedAlways<string>
  name: string | null
}

/** Legacy cursor table of the stock's old subscription indexer (service + method -> state). */
export interface Subscription {
  service: string
  method: string
  state: string
}

export interface SuggestedFeed {
  uri: string
  order: number
}

export interface SuggestedFollow {
  did: string
  order: number
}

export interface TaggedSuggestion {
  tag: string
  subject: string
  subjectType: string
}

export interface ThreadGate {
  uri: string
  cid: string
  creator: string
  postUri: string
  createdAt: string
  indexedAt: string
}

export interface ThreadMute {
  rootUri: string
  mutedByDid: string
  createdAt: string
}

export interface Verification {
  uri: string
  cid: string
  rkey: string
  creator: string
  subject: string
  handle: string
  displayName: string
  createdAt: string
  indexedAt: string
  /** sic: `sortedAt`, unlike every other table's `sortAt` */
  sortedAt: GeneratedAlways<string>
}

/** Runtime parameters of the materialized view (seeded by the stock migrations). */
export interface ViewParam {
  name: string
  value: string | null
}

// Ours, additive: the stock has no equivalent.

/** The persisted firehose cursor, one row per source (relay/PDS url). */
export interface OpenplaneCursor {
  source: string
  seq: Int8
  updatedAt: ColumnType<Date, Date | string | undefined, Date | string>
  /** Stream time of the last event the cursor moved past (null: none recorded yet). */
  eventTime: ColumnType<Date | null, Date | string | null | undefined, Date | string | null>
}

/** The cursor of a stream other than a repo firehose (bsync's scans; `bsync:op` etc.). */
export interface OpenplaneStreamCursor {
  stream: string
  cursor: string
  updatedAt: ColumnType<Date, Date | string | undefined, Date | string>
}

/** What the indexer committed, as one Jetstream message each (`/subscribe`; migration 10). */
export interface OpenplanePublishedEvent {
  /** The message's cursor: unique, increasing in commit order. */
  time_us: Int8
  did: string
  /** A commit's collection; null for identity and account messages. */
  collection: string | null
  /** The message's JSON text. */
  message: string
}

/** DIDs interned to the u32 ids of the in-memory graph (@openplane/graph). */
export interface OpenplaneActorId {
  id: GeneratedAlways<number>
  did: string
}

/** A serialized graph; its data is in openplane_graph_snapshot_chunk. */
export interface OpenplaneGraphSnapshot {
  id: GeneratedAlways<number>
  takenAt: ColumnType<Date, Date | string | undefined, Date | string>
  cursor: Int8
  actorIdHighWater: number
  edgeCount: Int8
  chunkCount: number
  bytes: Int8
  format: number
}

export interface OpenplaneGraphSnapshotChunk {
  snapshot: number
  seq: number
  data: Uint8Array
}

/** Backfill state per repo (@openplane/backfill). */
export interface OpenplaneRepo {
  did: string
  state: ColumnType<RepoBackfillState, RepoBackfillState | undefined, RepoBackfillState>
  rev: string | null
  host: string | null
  attempts: ColumnType<number, number | undefined, number>
  records: number | null
  reason: string | null
  enqueuedAt: ColumnType<Date, Date | string | undefined, Date | string>
  updatedAt: ColumnType<Date, Date | string | undefined, Date | string>
  /** A failed repo: when to fetch it again (null: now). */
  retryAt: ColumnType<Date | null, Date | string | null | undefined, Date | string | null>
  /** A failed repo: since when its fetches have been failing. */
  failedSince: ColumnType<Date | null, Date | string | null | undefined, Date | string | null>
  /** Failed fetches in a row (the backoff grows with it). */
  failures: ColumnType<number, number | undefined, number>
}

/** A live event held while its repo is fetched (@openplane/ingest's repo gate), as JSON. */
export interface OpenplaneHeldEvent {
  source: string
  seq: Int8
  did: string
  event: string
  id: ColumnType<number, never, never>
}

/** `purge`: a community deployment removes the account's index (it left the community). */
export type RepoBackfillState = 'pending' | 'done' | 'failed' | 'purge'

export interface DatabaseSchema {
  activity_subscription: ActivitySubscription
  actor: Actor
  actor_block: ActorBlock
  actor_state: ActorState
  actor_sync: ActorSync
  algo_whats_hot_view: AlgoWhatsHotView
  blob_takedown: BlobTakedown
  bookmark: Bookmark
  did_cache: DidCache
  draft: Draft
  duplicate_record: DuplicateRecord
  feed_generator: FeedGenerator
  feed_item: FeedItem
  follow: Follow
  label: Label
  labeler: Labeler
  like: Like
  list: List
  list_block: ListBlock
  list_item: ListItem
  list_mute: ListMute
  moderation_action: ModerationAction
  moderation_action_subject_blob: ModerationActionSubjectBlob
  moderation_event: ModerationEvent
  moderation_report: ModerationReport
  moderation_report_resolution: ModerationReportResolution
  moderation_subject_status: ModerationSubjectStatus
  mute: Mute
  notification: Notification
  notification_push_token: NotificationPushToken
  op_thread_reply: OpThreadReply
  post: Post
  post_agg: PostAgg
  post_embed_external: PostEmbedExternal
  post_embed_gallery_image: PostEmbedGalleryImage
  post_embed_image: PostEmbedImage
  post_embed_record: PostEmbedRecord
  post_embed_video: PostEmbedVideo
  post_gate: PostGate
  private_data: PrivateData
  profile: Profile
  profile_agg: ProfileAgg
  quote: Quote
  record: RepoRecord
  reference_list_opt_out: ReferenceListOptOut
  repost: Repost
  starter_pack: StarterPack
  subscription: Subscription
  suggested_feed: SuggestedFeed
  suggested_follow: SuggestedFollow
  tagged_suggestion: TaggedSuggestion
  thread_gate: ThreadGate
  thread_mute: ThreadMute
  verification: Verification
  view_param: ViewParam
  openplane_cursor: OpenplaneCursor
  openplane_stream_cursor: OpenplaneStreamCursor
  openplane_published_event: OpenplanePublishedEvent
  openplane_actor_id: OpenplaneActorId
  openplane_graph_snapshot: OpenplaneGraphSnapshot
  openplane_graph_snapshot_chunk: OpenplaneGraphSnapshotChunk
  openplane_repo: OpenplaneRepo
  openplane_held_event: OpenplaneHeldEvent
}
