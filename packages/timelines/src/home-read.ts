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
  const [timeline, own] = await Promise.all([
    reads.page(reader, opts),
    reads.authors([reader], opts),
  ])
  if (!timeline || !celebrities.length) return { timeline, own, celebrities: undefined }
  // A full timeline page ends at its last item: nothing older can make the merged page.
  const last = timeline.members.at(-1)
  const full = timeline.members.length === pageCount(opts.limit)
  const atLeast = full && last !== undefined ? decodeMember(last) : undefined
  return { timeline, own, celebrities: await reads.authors(celebrities, { ...opts, atLeast }) }
}
