// A home timeline page's reads composed from the store's single-list reads, for backends that
// cannot do them in one step (the in-process store, where a step costs nothing, and a Redis
// Cluster, whose lists live on several nodes). The single-Redis store does the same in one
// script call (redis-scripts.ts HOME); both give exactly what this does.
import { pageCount } from './rebuild.ts'
import type { HomeRead, PageOptions, TimelineStore } from './types.ts'

export async function composeHome(
  store: Pick<TimelineStore, 'page' | 'authorRecent'>,
  reader: string,
  celebrities: readonly string[],
  opts: PageOptions,
): Promise<HomeRead> {
  const [timeline, own] = await Promise.all([
    store.page(reader, opts),
    store.authorRecent([reader], opts),
  ])
  if (!timeline || !celebrities.length) return { timeline, own, celebrities: undefined }
  // A full timeline page ends at its last item: nothing older can make the merged page.
  const atLeast =
    timeline.items.length === pageCount(opts.limit) ? timeline.items.at(-1) : undefined
  return { timeline, own, celebrities: await store.authorRecent(celebrities, { ...opts, atLeast }) }
}
