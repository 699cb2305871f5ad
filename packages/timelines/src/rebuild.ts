// Shared by both stores: turning a rebuild's rows into stored members and a horizon, and limits.
import { encodeMember, ghostOf } from './member.ts'
import type { TimelineItem } from './types.ts'

/** Members ascending; when the read was bounded, its oldest row becomes the horizon (ghost). */
export function rebuildMembers(
  items: readonly TimelineItem[],
  complete: boolean,
): { members: string[]; ghost: string | undefined } {
  const members = [...new Set(items.map(encodeMember))].sort()
  if (complete) return { members, ghost: undefined }
  const boundary = members.shift()
  if (boundary === undefined) throw new RangeError('an incomplete rebuild needs its boundary row')
  return { members, ghost: ghostOf(boundary) }
}

/** Rows a page may hold; the stock yields an empty page for a zero or negative limit. */
export function pageCount(limit: number): number {
  if (!Number.isFinite(limit) || limit <= 0) return 0
  return Math.min(Math.floor(limit), 10_000)
}

export function checkLength(name: string, n: number): number {
  if (!Number.isInteger(n) || n < 1) throw new RangeError(`${name} must be a positive integer`)
  return n
}

/**
 * Item count past which an add trims back to the target. The slack (1/16 of the target) lets one
 * trim serve many adds; small lists are trimmed exactly.
 */
export const trimAbove = (target: number): number => target + Math.floor(target / 16)
