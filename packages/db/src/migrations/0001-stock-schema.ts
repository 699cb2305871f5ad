// The complete final schema of the stock dataplane (@atproto/bsky 0.0.280, last stock migration
// _20260904T130000000Z), written from scratch instead of replaying its 61 migrations. Column order
// matches the stock's (later stock migrations appended columns), so `select *` and positional
// COPY behave the same on both. Objects are created unqualified: the connection's search_path puts
// the configured schema first; pg_trgm lives in public. tests/db/schema.test.ts compares the
// resulting catalog with one the stock migrations produced. Long because it is the whole schema,
// in one migration so that it can be compared, and adopted, as one.
import { sql, type Kysely } from 'kysely'

// Every table that is a record carries the stock's derived sort key.
const SORT_AT = `"sortAt" varchar GENERATED ALWAYS AS (LEAST("createdAt", "indexedAt")) STORED NOT NULL`

const TABLES = [
  `CREATE TABLE activity_subscription (
    creator varchar NOT NULL,
    "subjectDid" varchar NOT NULL,
    key varchar NOT NULL,
    "indexedAt" varchar NOT NULL,
    post boolean NOT NULL,
    reply boolean NOT NULL,
    PRIMARY KEY (creator, key),
    CONSTRAINT activity_subscription_unique_creator_subject_did UNIQUE (creator, "subjectDid")
  )`,
  `CREATE TABLE actor (
    did varchar PRIMARY KEY,
    handle varchar UNIQUE,
    "indexedAt" varchar NOT NULL,
    "takedownRef" varchar,
    "upstreamStatus" varchar,
    "trustedVerifier" boolean NOT NULL DEFAULT false,
    "ageAssuranceStatus" text,
    "ageAssuranceLastInitiatedAt" varchar,
    "ageAssuranceAccess" text,
    "ageAssuranceCountryCode" text,
    "ageAssuranceRegionCode" text
  )`,
  `CREATE TABLE actor_block (
    uri varchar PRIMARY KEY,
    cid varchar NOT NULL,
    creator varchar NOT NULL,
    "subjectDid" varchar NOT NULL,
    "createdAt" varchar NOT NULL,
    "indexedAt" varchar NOT NULL,
    ${SORT_AT},
    CONSTRAINT actor_block_unique_subject UNIQUE (creator, "subjectDid")
  )`,
  `CREATE TABLE actor_state (
    did varchar PRIMARY KEY,
    "lastSeenNotifs" varchar NOT NULL,
    "priorityNotifs" boolean NOT NULL DEFAULT false
  )`,
  `CREATE TABLE actor_sync (
    did varchar PRIMARY KEY,
    "commitCid" varchar NOT NULL,
    "repoRev" varchar
  )`,
  `CREATE TABLE blob_takedown (
    did varchar NOT NULL,
    cid varchar NOT NULL,
    "takedownRef" varchar NOT NULL,
    PRIMARY KEY (did, cid)
  )`,
  `CREATE TABLE bookmark (
    creator varchar NOT NULL,
    key varchar NOT NULL,
    "subjectUri" varchar NOT NULL,
    "subjectCid" varchar NOT NULL,
    "indexedAt" varchar NOT NULL,
    PRIMARY KEY (creator, key),
    CONSTRAINT bookmark_unique_uri_creator UNIQUE ("subjectUri", creator)
  )`,
  `CREATE TABLE did_cache (
    did varchar PRIMARY KEY,
    doc jsonb NOT NULL,
    "updatedAt" bigint NOT NULL
  )`,
  `CREATE TABLE draft (
    creator varchar NOT NULL,
    key varchar NOT NULL,
    "createdAt" varchar NOT NULL,
    "updatedAt" varchar NOT NULL,
    payload text NOT NULL,
    PRIMARY KEY (creator, key)
  )`,
  `CREATE TABLE duplicate_record (
    uri varchar PRIMARY KEY,
    cid varchar NOT NULL,
    "duplicateOf" varchar NOT NULL,
    "indexedAt" varchar NOT NULL
  )`,
  `CREATE TABLE feed_generator (
    uri varchar PRIMARY KEY,
    cid varchar NOT NULL,
    creator varchar NOT NULL,
    "feedDid" varchar NOT NULL,
    "displayName" varchar,
    description varchar,
    "descriptionFacets" varchar,
    "avatarCid" varchar,
    "createdAt" varchar NOT NULL,
    "indexedAt" varchar NOT NULL,
    ${SORT_AT}
  )`,
  // Not generated here: a repost's sortAt is copied from the repost, not derived per row.
  `CREATE TABLE feed_item (
    uri varchar PRIMARY KEY,
    cid varchar NOT NULL,
    type varchar NOT NULL,
    "postUri" varchar NOT NULL,
    "originatorDid" varchar NOT NULL,
    "sortAt" varchar NOT NULL
  )`,
  `CREATE TABLE follow (
    uri varchar PRIMARY KEY,
    cid varchar NOT NULL,
    creator varchar NOT NULL,
    "subjectDid" varchar NOT NULL,
    "createdAt" varchar NOT NULL,
    "indexedAt" varchar NOT NULL,
    ${SORT_AT},
    CONSTRAINT follow_unique_subject UNIQUE (creator, "subjectDid")
  )`,
  `CREATE TABLE label (
    src varchar NOT NULL,
    uri varchar NOT NULL,
    cid varchar NOT NULL,
    val varchar NOT NULL,
    neg boolean NOT NULL,
    cts varchar NOT NULL,
    exp varchar,
    PRIMARY KEY (src, uri, cid, val)
  )`,
  `CREATE TABLE labeler (
    uri varchar PRIMARY KEY,
    cid varchar NOT NULL,
    creator varchar NOT NULL,
    "createdAt" varchar NOT NULL,
    "indexedAt" varchar NOT NULL,
    ${SORT_AT}
  )`,
  `CREATE TABLE "like" (
    uri varchar PRIMARY KEY,
    cid varchar NOT NULL,
    creator varchar NOT NULL,
    subject varchar NOT NULL,
    "subjectCid" varchar NOT NULL,
    "createdAt" varchar NOT NULL,
    "indexedAt" varchar NOT NULL,
    ${SORT_AT},
    via varchar,
    "viaCid" varchar,
    CONSTRAINT like_unique_subject UNIQUE (subject, creator)
  )`,
  `CREATE TABLE list (
    uri varchar PRIMARY KEY,
    cid varchar NOT NULL,
    creator varchar NOT NULL,
    name varchar NOT NULL,
    purpose varchar NOT NULL,
    description varchar,
    "descriptionFacets" varchar,
    "avatarCid" varchar,
    "createdAt" varchar NOT NULL,
    "indexedAt" varchar NOT NULL,
    ${SORT_AT}
  )`,
  `CREATE TABLE list_block (
    uri varchar PRIMARY KEY,
    cid varchar NOT NULL,
    creator varchar NOT NULL,
    "subjectUri" varchar NOT NULL,
    "createdAt" varchar NOT NULL,
    "indexedAt" varchar NOT NULL,
    ${SORT_AT},
    CONSTRAINT list_block_unique_subject UNIQUE (creator, "subjectUri")
  )`,
  `CREATE TABLE list_item (
    uri varchar PRIMARY KEY,
    cid varchar NOT NULL,
    creator varchar NOT NULL,
    "subjectDid" varchar NOT NULL,
    "listUri" varchar NOT NULL,
    "createdAt" varchar NOT NULL,
    "indexedAt" varchar NOT NULL,
    ${SORT_AT},
    CONSTRAINT list_item_unique_subject_in_list UNIQUE ("listUri", "subjectDid")
  )`,
  `CREATE TABLE list_mute (
    "listUri" varchar NOT NULL,
    "mutedByDid" varchar NOT NULL,
    "createdAt" varchar NOT NULL,
    PRIMARY KEY ("mutedByDid", "listUri")
  )`,
  // Legacy moderation tables (moderation moved to Ozone); kept because the stock still has them.
  `CREATE TABLE moderation_action (
    id serial PRIMARY KEY,
    action varchar NOT NULL,
    "subjectType" varchar NOT NULL,
    "subjectDid" varchar NOT NULL,
    "subjectUri" varchar,
    "subjectCid" varchar,
    reason text NOT NULL,
    "createdAt" varchar NOT NULL,
    "createdBy" varchar NOT NULL,
    "reversedAt" varchar,
    "reversedBy" varchar,
    "reversedReason" text,
    "createLabelVals" varchar,
    "negateLabelVals" varchar,
    "durationInHours" integer,
    "expiresAt" varchar
  )`,
  `CREATE TABLE moderation_action_subject_blob (
    "actionId" integer NOT NULL REFERENCES moderation_action (id),
    cid varchar NOT NULL,
    PRIMARY KEY ("actionId", cid)
  )`,
  `CREATE TABLE moderation_event (
    id serial PRIMARY KEY,
    action varchar NOT NULL,
    "subjectType" varchar NOT NULL,
    "subjectDid" varchar NOT NULL,
    "subjectUri" varchar,
    "subjectCid" varchar,
    comment text,
    meta jsonb,
    "createdAt" varchar NOT NULL,
    "createdBy" varchar NOT NULL,
    "reversedAt" varchar,
    "reversedBy" varchar,
    "durationInHours" integer,
    "expiresAt" varchar,
    "reversedReason" text,
    "createLabelVals" varchar,
    "negateLabelVals" varchar,
    "legacyRefId" integer
  )`,
  `CREATE TABLE moderation_report (
    id serial PRIMARY KEY,
    "subjectType" varchar NOT NULL,
    "subjectDid" varchar NOT NULL,
    "subjectUri" varchar,
    "subjectCid" varchar,
    "reasonType" varchar NOT NULL,
    reason text,
    "reportedByDid" varchar NOT NULL,
    "createdAt" varchar NOT NULL
  )`,
  `CREATE TABLE moderation_report_resolution (
    "reportId" integer NOT NULL REFERENCES moderation_report (id),
    "actionId" integer NOT NULL REFERENCES moderation_action (id),
    "createdBy" varchar NOT NULL,
    "createdAt" varchar NOT NULL,
    PRIMARY KEY ("reportId", "actionId")
  )`,
  `CREATE TABLE moderation_subject_status (
    id serial PRIMARY KEY,
    did varchar NOT NULL,
    "recordPath" varchar NOT NULL DEFAULT '',
    "blobCids" jsonb,
    "recordCid" varchar,
    "reviewState" varchar NOT NULL,
    comment varchar,
    "muteUntil" varchar,
    "lastReviewedAt" varchar,
    "lastReviewedBy" varchar,
    "lastReportedAt" varchar,
    takendown boolean NOT NULL DEFAULT false,
    "suspendUntil" varchar,
    "createdAt" varchar NOT NULL,
    "updatedAt" varchar NOT NULL,
    CONSTRAINT moderation_status_unique_idx UNIQUE (did, "recordPath")
  )`,
  `CREATE TABLE mute (
    "subjectDid" varchar NOT NULL,
    "mutedByDid" varchar NOT NULL,
    "createdAt" varchar NOT NULL,
    "onlyReposts" boolean NOT NULL DEFAULT false,
    "onlyQuoteposts" boolean NOT NULL DEFAULT false,
    PRIMARY KEY ("mutedByDid", "subjectDid")
  )`,
  `CREATE TABLE notification (
    id bigserial PRIMARY KEY,
    did varchar NOT NULL,
    "recordUri" varchar NOT NULL,
    "recordCid" varchar NOT NULL,
    author varchar NOT NULL,
    reason varchar NOT NULL,
    "reasonSubject" varchar,
    "sortAt" varchar NOT NULL
  )`,
  `CREATE TABLE notification_push_token (
    did varchar NOT NULL,
    platform varchar NOT NULL,
    token varchar NOT NULL,
    "appId" varchar NOT NULL,
    PRIMARY KEY (did, token)
  )`,
  `CREATE TABLE op_thread_reply (
    "rootUri" varchar NOT NULL,
    "parentUri" varchar NOT NULL,
    uri varchar NOT NULL,
    "deletedAt" varchar,
    PRIMARY KEY ("rootUri", uri)
  )`,
  `CREATE TABLE post (
    uri varchar PRIMARY KEY,
    cid varchar NOT NULL,
    creator varchar NOT NULL,
    text varchar NOT NULL,
    "replyRoot" varchar,
    "replyRootCid" varchar,
    "replyParent" varchar,
    "replyParentCid" varchar,
    "createdAt" varchar NOT NULL,
    "indexedAt" varchar NOT NULL,
    ${SORT_AT},
    langs jsonb,
    "invalidReplyRoot" boolean,
    "violatesThreadGate" boolean,
    tags jsonb,
    "violatesEmbeddingRules" boolean,
    "hasThreadGate" boolean,
    "hasPostGate" boolean
  )`,
  `CREATE TABLE post_agg (
    uri varchar PRIMARY KEY,
    "likeCount" bigint NOT NULL DEFAULT 0,
    "replyCount" bigint NOT NULL DEFAULT 0,
    "repostCount" bigint NOT NULL DEFAULT 0,
    "quoteCount" bigint NOT NULL DEFAULT 0,
    "bookmarkCount" bigint NOT NULL DEFAULT 0
  )`,
  `CREATE TABLE post_embed_external (
    "postUri" varchar PRIMARY KEY,
    uri varchar NOT NULL,
    title varchar NOT NULL,
    description varchar NOT NULL,
    "thumbCid" varchar
  )`,
  `CREATE TABLE post_embed_gallery_image (
    "postUri" varchar NOT NULL,
    "position" varchar NOT NULL,
    "imageCid" varchar NOT NULL,
    alt varchar NOT NULL,
    PRIMARY KEY ("postUri", "position")
  )`,
  `CREATE TABLE post_embed_image (
    "postUri" varchar NOT NULL,
    "position" varchar NOT NULL,
    "imageCid" varchar NOT NULL,
    alt varchar NOT NULL,
    PRIMARY KEY ("postUri", "position")
  )`,
  `CREATE TABLE post_embed_record (
    "postUri" varchar NOT NULL,
    "embedUri" varchar NOT NULL,
    "embedCid" varchar NOT NULL,
    PRIMARY KEY ("postUri", "embedUri")
  )`,
  `CREATE TABLE post_embed_video (
    "postUri" varchar PRIMARY KEY,
    "videoCid" varchar NOT NULL,
    alt varchar
  )`,
  `CREATE TABLE post_gate (
    uri varchar PRIMARY KEY,
    cid varchar NOT NULL,
    creator varchar NOT NULL,
    "postUri" varchar NOT NULL UNIQUE,
    "createdAt" varchar NOT NULL,
    "indexedAt" varchar NOT NULL
  )`,
  `CREATE TABLE private_data (
    "actorDid" varchar NOT NULL,
    namespace varchar NOT NULL,
    key varchar NOT NULL,
    payload text NOT NULL,
    "indexedAt" varchar NOT NULL,
    "updatedAt" varchar NOT NULL,
    PRIMARY KEY ("actorDid", namespace, key)
  )`,
  `CREATE TABLE profile (
    uri varchar PRIMARY KEY,
    cid varchar NOT NULL,
    creator varchar NOT NULL,
    "displayName" varchar,
    description varchar,
    "avatarCid" varchar,
    "bannerCid" varchar,
    "indexedAt" varchar NOT NULL,
    "joinedViaStarterPackUri" varchar,
    "createdAt" varchar NOT NULL,
    "pinnedPost" varchar,
    "pinnedPostCid" varchar
  )`,
  `CREATE TABLE profile_agg (
    did varchar PRIMARY KEY,
    "followersCount" bigint NOT NULL DEFAULT 0,
    "followsCount" bigint NOT NULL DEFAULT 0,
    "postsCount" bigint NOT NULL DEFAULT 0
  )`,
  `CREATE TABLE quote (
    uri varchar PRIMARY KEY,
    cid varchar NOT NULL,
    subject varchar NOT NULL,
    "subjectCid" varchar NOT NULL,
    "createdAt" varchar NOT NULL,
    "indexedAt" varchar NOT NULL,
    ${SORT_AT}
  )`,
  `CREATE TABLE record (
    uri varchar PRIMARY KEY,
    cid varchar NOT NULL,
    did varchar NOT NULL,
    json text NOT NULL,
    "indexedAt" varchar NOT NULL,
    "takedownRef" varchar,
    tags jsonb
  )`,
  `CREATE TABLE reference_list_opt_out (
    uri varchar PRIMARY KEY,
    cid varchar NOT NULL,
    creator varchar NOT NULL,
    "subjectUri" varchar NOT NULL,
    "createdAt" varchar NOT NULL,
    "indexedAt" varchar NOT NULL,
    ${SORT_AT},
    CONSTRAINT reference_list_opt_out_unique_subject UNIQUE (creator, "subjectUri")
  )`,
  `CREATE TABLE repost (
    uri varchar PRIMARY KEY,
    cid varchar NOT NULL,
    creator varchar NOT NULL,
    subject varchar NOT NULL,
    "subjectCid" varchar NOT NULL,
    "createdAt" varchar NOT NULL,
    "indexedAt" varchar NOT NULL,
    ${SORT_AT},
    via varchar,
    "viaCid" varchar,
    CONSTRAINT repost_unique_subject UNIQUE (creator, subject)
  )`,
  `CREATE TABLE starter_pack (
    uri varchar PRIMARY KEY,
    cid varchar NOT NULL,
    creator varchar NOT NULL,
    "createdAt" varchar NOT NULL,
    "indexedAt" varchar NOT NULL,
    ${SORT_AT},
    name varchar
  )`,
  `CREATE TABLE subscription (
    service varchar NOT NULL,
    method varchar NOT NULL,
    state varchar NOT NULL,
    PRIMARY KEY (service, method)
  )`,
  `CREATE TABLE suggested_feed (
    uri varchar PRIMARY KEY,
    "order" integer NOT NULL
  )`,
  `CREATE TABLE suggested_follow (
    did varchar PRIMARY KEY,
    "order" integer NOT NULL
  )`,
  `CREATE TABLE tagged_suggestion (
    tag varchar NOT NULL,
    subject varchar NOT NULL,
    "subjectType" varchar NOT NULL,
    PRIMARY KEY (tag, subject)
  )`,
  `CREATE TABLE thread_gate (
    uri varchar PRIMARY KEY,
    cid varchar NOT NULL,
    creator varchar NOT NULL,
    "postUri" varchar NOT NULL UNIQUE,
    "createdAt" varchar NOT NULL,
    "indexedAt" varchar NOT NULL
  )`,
  `CREATE TABLE thread_mute (
    "rootUri" varchar NOT NULL,
    "mutedByDid" varchar NOT NULL,
    "createdAt" varchar NOT NULL,
    PRIMARY KEY ("rootUri", "mutedByDid")
  )`,
  // The one generated sort key spelled "sortedAt".
  `CREATE TABLE verification (
    uri varchar PRIMARY KEY,
    cid varchar NOT NULL,
    rkey varchar NOT NULL,
    creator varchar NOT NULL,
    subject varchar NOT NULL,
    handle varchar NOT NULL,
    "displayName" varchar NOT NULL,
    "createdAt" varchar NOT NULL,
    "indexedAt" varchar NOT NULL,
    "sortedAt" varchar GENERATED ALWAYS AS (LEAST("createdAt", "indexedAt")) STORED NOT NULL,
    CONSTRAINT verification_unique_subject_creator UNIQUE (subject, creator)
  )`,
  `CREATE TABLE view_param (
    name varchar PRIMARY KEY,
    value varchar
  )`,
]

// The stock parameterises its materialized view through view_param rather than redefining it.
const WHATS_HOT = [
  `INSERT INTO view_param (name, value) VALUES
    ('whats_hot_like_threshold', '2'),
    ('whats_hot_interval', '1day')`,
  // Hacker-News style: likes decayed by age in hours, gravity 1.8.
  `CREATE MATERIALIZED VIEW algo_whats_hot_view AS
    SELECT
      post.uri,
      post.cid,
      round(1000000 * (post_agg."likeCount"
        / ((extract(epoch FROM age(now(), post."indexedAt"::timestamp)) / 3600 + 2) ^ 1.8))) AS score
    FROM post
    JOIN post_agg ON post_agg.uri = post.uri
    WHERE post."indexedAt" > (
        SELECT to_char(now() - value::interval, 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS val
        FROM view_param
        WHERE name = 'whats_hot_interval'
      )
      AND post."replyParent" IS NULL
      AND post_agg."likeCount" > (
        SELECT value::integer AS val
        FROM view_param
        WHERE name = 'whats_hot_like_threshold'
      )`,
]

const INDEXES = [
  `CREATE INDEX actor_block_subjectdid_idx ON actor_block ("subjectDid")`,
  `CREATE INDEX actor_handle_tgrm_idx ON actor USING gist (handle gist_trgm_ops)`,
  // The unique index is what lets the stock REFRESH ... CONCURRENTLY.
  `CREATE UNIQUE INDEX algo_whats_hot_view_uri_idx ON algo_whats_hot_view (uri)`,
  `CREATE INDEX algo_whats_hot_view_cursor_idx ON algo_whats_hot_view (score, cid)`,
  `CREATE INDEX draft_creator_updated_at_key_idx ON draft (creator, "updatedAt", key)`,
  `CREATE INDEX duplicate_record_duplicate_of_idx ON duplicate_record ("duplicateOf")`,
  `CREATE INDEX feed_generator_creator_index ON feed_generator (creator)`,
  `CREATE INDEX feed_item_cursor_idx ON feed_item ("sortAt", cid)`,
  `CREATE INDEX feed_item_originator_cursor_idx ON feed_item ("originatorDid", "sortAt", cid)`,
  `CREATE INDEX feed_item_post_uri_idx ON feed_item ("postUri")`,
  `CREATE INDEX follow_creator_cursor_idx ON follow (creator, "sortAt", cid)`,
  `CREATE INDEX follow_subject_cursor_idx ON follow ("subjectDid", "sortAt", cid)`,
  `CREATE INDEX label_cts_idx ON label (cts)`,
  `CREATE INDEX label_uri_index ON label (uri)`,
  `CREATE INDEX labeler_order_by_idx ON labeler ("sortAt", cid)`,
  `CREATE INDEX like_creator_cursor_idx ON "like" (creator, "sortAt", cid)`,
  `CREATE INDEX like_subject_sort_at_creator_idx ON "like" (subject, "sortAt" DESC) INCLUDE (creator)`,
  `CREATE INDEX list_creator_idx ON list (creator)`,
  `CREATE INDEX list_item_creator_idx ON list_item (creator)`,
  `CREATE INDEX list_item_subject_idx ON list_item ("subjectDid")`,
  `CREATE INDEX moderation_action_subject_blob_cid_idx ON moderation_action_subject_blob (cid)`,
  `CREATE INDEX moderation_report_resolution_action_id_idx ON moderation_report_resolution ("actionId")`,
  `CREATE INDEX moderation_subject_status_blob_cids_idx ON moderation_subject_status USING gin ("blobCids")`,
  `CREATE INDEX notification_author_idx ON notification (author)`,
  `CREATE INDEX notification_did_sortat_idx ON notification (did, "sortAt")`,
  `CREATE INDEX notification_record_idx ON notification ("recordUri")`,
  `CREATE INDEX post_creator_cursor_idx ON post (creator, "sortAt", cid)`,
  `CREATE INDEX post_order_by_idx ON post ("sortAt", cid)`,
  `CREATE INDEX post_replyparent_idx ON post ("replyParent") INCLUDE (uri)`,
  `CREATE INDEX profile_creator_idx ON profile (creator)`,
  `CREATE INDEX profile_display_name_tgrm_idx ON profile USING gist ("displayName" gist_trgm_ops)`,
  `CREATE INDEX profile_starter_pack_joined_idx ON profile ("joinedViaStarterPackUri", "createdAt")`,
  `CREATE INDEX quote_subject_cursor_idx ON quote (subject, "sortAt", cid)`,
  `CREATE INDEX record_did_idx ON record (did)`,
  `CREATE INDEX repost_order_by_idx ON repost ("sortAt", cid)`,
  `CREATE INDEX repost_subject_idx ON repost (subject)`,
  `CREATE INDEX starter_pack_creator_order_by_idx ON starter_pack (creator, "sortAt", cid)`,
  `CREATE INDEX starter_pack_name_tgrm_idx ON starter_pack USING gist (name gist_trgm_ops)`,
]

export async function up(db: Kysely<unknown>): Promise<void> {
  // One statement per query: PGlite's extended protocol takes no multi-statement strings.
  for (const statement of [...TABLES, ...WHATS_HOT, ...INDEXES]) {
    await sql.raw(statement).execute(db)
  }
}
