// The canonical OP thread: the oldest unbroken line of the root author's own replies beneath the
// root, as the stock resolves it from op_thread_reply rows.

export interface OpReplyRow {
  uri: string
  parentUri: string
  deletedAt: string | null
}

/**
 * Walks from the root choosing, at each level, the oldest OP reply (rkeys are TIDs, so they sort
 * by creation). A deleted reply keeps its slot while something below it survives; once nothing
 * does, only a sibling written after the deletion may take the slot. A cycle in the rows voids
 * the answer. Undefined when there is no OP reply.
 */
export function canonicalOpThread(rootUri: string, rows: OpReplyRow[]): string[] | undefined {
  const children = new Map<string, string[]>()
  const deletedAt = new Map<string, number>()
  for (const row of rows) {
    const siblings = children.get(row.parentUri)
    if (siblings) siblings.push(row.uri)
    else children.set(row.parentUri, [row.uri])
    if (row.deletedAt !== null) deletedAt.set(row.uri, new Date(row.deletedAt).getTime())
  }
  for (const siblings of children.values()) siblings.sort()

  const onPath = new Set([rootUri])
  let cyclic = false
  const walk = (parentUri: string): string[] => {
    let vacatedAt = 0
    for (const uri of children.get(parentUri) ?? []) {
      if (onPath.has(uri)) {
        cyclic = true
        return []
      }
      if (vacatedAt !== 0 && !writtenAfter(uri, vacatedAt)) continue
      onPath.add(uri)
      const below = walk(uri)
      if (cyclic) return []
      const deleted = deletedAt.get(uri)
      if (deleted === undefined || below.length > 0) return [uri, ...below]
      onPath.delete(uri)
      if (deleted > vacatedAt) vacatedAt = deleted
    }
    return []
  }

  const thread = [rootUri, ...walk(rootUri)]
  return !cyclic && thread.length > 1 ? thread : undefined
}

const S32 = '234567abcdefghijklmnopqrstuvwxyz'

/**
 * Whether the post's rkey (a TID: microseconds in its first 11 base32-sort chars) claims a
 * creation after `ms`. Anything that is not TID-shaped is not newer, so a malformed reply cannot
 * take a vacated slot.
 */
function writtenAfter(uri: string, ms: number): boolean {
  const path = uri.replace(/^at:\/\//, '').split(/[?#]/)[0] ?? ''
  const rkey = (path.split('/').filter(Boolean)[2] ?? '').replaceAll('-', '')
  if (rkey.length !== 13) return false
  let micros = 0
  for (const c of rkey.slice(0, 11)) micros = micros * 32 + S32.indexOf(c)
  return micros / 1000 > ms
}
