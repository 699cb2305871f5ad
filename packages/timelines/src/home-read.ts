// A home timeline page's reads composed from the store's single-list reads, for backends that
// cannot do them in one step (the in-process store, where a step costs nothing, and a Redis
// Cluster, whose lists live on several nodes). The single-Redis store does the same in one
// script call (redis-scripts.ts HOME); both give exactly what this does.
import { decodeMember } from './member.ts'
import { pageCount } from './rebuild.ts'
import type { AuthorMembers, HomeRead, MemberPage, PageOptions } from './types.ts'

/** A backend's single-list reads, as members (what its `page` and `authorRecent` decode). */
export interface MemberReads {
  page(reader: string, opts: PageOptions): Promise<MemberPage | null>
  authors(authors: readonly string[], opts: PageOptions): Promise<AuthorMembers>
}

export async function composeHome(
  reads: MemberReads,
  reader: string,
  celebrities: readonly string[],
  opts: PageOptions,
): Promise<HomeRead> {
  if (!celebrities.length) {
    const [timeline, own] = await Promise.all([
      reads.page(reader, opts),
      reads.authors([reader], opts),
    ])
    return { timeline, own, celebrities: undefined }
  }
  // With celebrities the own list is read after the timeline, with theirs, down to the same
  // floor: a round trip either way.
  const timeline = await reads.page(reader, opts)
  if (!timeline) {
    return { timeline, own: await reads.authors([reader], opts), celebrities: undefined }
  }
  // A full timeline page ends at its last item: nothing older can make the merged page.
  const last = timeline.members.at(-1)
  const full = timeline.members.length === pageCount(opts.limit)
  const floored = { ...opts, atLeast: full && last !== undefined ? decodeMember(last) : undefined }
  const [own, followed] = await Promise.all([
    reads.authors([reader], floored),
    reads.authors(celebrities, floored),
  ])
  return { timeline, own, celebrities: followed }
}
