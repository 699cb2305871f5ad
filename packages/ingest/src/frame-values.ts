// Checks of a firehose frame's values, shared by both ways of reading a frame (frames.ts, the
// reference; commit-frame.ts, the fast path) so that they accept exactly the same.

export type Obj = Record<string, unknown>

export const isObj = (v: unknown): v is Obj => !!v && typeof v === 'object' && !Array.isArray(v)
export const isDid = (v: unknown): v is string =>
  typeof v === 'string' && /^did:[a-z]+:[a-zA-Z0-9._:%-]{1,2048}$/.test(v)
export const isSeq = (v: unknown): v is number =>
  typeof v === 'number' && Number.isSafeInteger(v) && v >= 0
export const isTime = (v: unknown): v is string =>
  typeof v === 'string' && !Number.isNaN(Date.parse(v))
