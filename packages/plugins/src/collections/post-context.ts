// What a post's judgement reads besides the post itself: the stock judges a reply by its parent,
// its root and the root's thread gate (validity, the ancestors it notifies), and a quote by the
// quoted post's gate (embedding rules). Whoever orders writes — the backfill's thread order, the
// writer's gate for repos being fetched — holds a post until these records are written.
const POST = 'app.bsky.feed.post'

const gateOf = (post: string, collection: string) => post.replace(`/${POST}/`, `/${collection}/`)

/** The records a post's judgement reads (uris): parent, root, the root's gate, quoted post's gate. */
export function contextOf(collection: string, record: unknown): string[] {
  if (collection !== POST || !record || typeof record !== 'object') return []
  const r = record as { reply?: unknown; embed?: unknown }
  const uris: string[] = []
  const uriAt = (v: unknown, ...path: string[]): string | undefined => {
    let cur: unknown = v
    for (const k of path)
      cur = cur && typeof cur === 'object' ? (cur as Record<string, unknown>)[k] : undefined
    return typeof cur === 'string' && cur.startsWith('at://') ? cur : undefined
  }
  const parent = uriAt(r.reply, 'parent', 'uri')
  const root = uriAt(r.reply, 'root', 'uri')
  if (parent) uris.push(parent)
  if (root) uris.push(root, gateOf(root, 'app.bsky.feed.threadgate'))
  const quoted = uriAt(r.embed, 'record', 'uri') ?? uriAt(r.embed, 'record', 'record', 'uri')
  if (quoted?.includes(`/${POST}/`)) uris.push(gateOf(quoted, 'app.bsky.feed.postgate'))
  return uris
}
