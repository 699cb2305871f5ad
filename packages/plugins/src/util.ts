import { AtUri, normalizeDatetimeAlways } from '@atproto/syntax'

export { AtUri }

/** The stock indexer stores `createdAt` normalised, falling back to the epoch for garbage. */
export const normalizeDate = (value: string): string => normalizeDatetimeAlways(value)

export const didOf = (uri: string): string => new AtUri(uri).host

/** Mirrors the generated `sortAt` column: least(createdAt, indexedAt), as ISO strings compare. */
export const sortAt = (createdAt: string, indexedAt: string): string =>
  createdAt < indexedAt ? createdAt : indexedAt
