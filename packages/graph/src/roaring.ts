// The roaring native addon. It is CommonJS with a native module.exports, so Node's ESM loader sees no
// named exports: take the class off the default export.
import roaring, { type ReadonlyRoaringBitmap32 } from 'roaring'

export const { RoaringBitmap32 } = roaring
export type RoaringBitmap32 = InstanceType<typeof RoaringBitmap32>
export type { ReadonlyRoaringBitmap32 }

/** Stable across versions and languages (Java, Go, C): what snapshots store. */
export const PORTABLE = 'portable'
