// Where the repos to backfill come from: a relay's or PDS's repo listing
// (com.atproto.sync.listRepos, paged), the repos that have a collection
// (com.atproto.sync.listReposByCollection, on relays that index it), or a list of DIDs.
import { readFile } from 'node:fs/promises'

export interface ListedRepo {
  did: string
  /** The repo's rev when listed, if the host says. */
  rev?: string
  /** False for deactivated, taken down or deleted accounts (nothing to fetch). */
  active: boolean
}

const DID = /^did:[a-z]+:[a-zA-Z0-9._:%-]+$/

async function getJson(url: URL, timeoutMs: number): Promise<unknown> {
  for (let attempt = 1; ; attempt++) {
    const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) }).catch(
      (err: unknown) => err as Error,
    )
    if (!(res instanceof Error) && res.ok) return res.json()
    // A listing is short work worth finishing: retry a few times before failing the command.
    const what = res instanceof Error ? res.message : `${res.status} ${await res.text()}`
    if (attempt >= 5) throw new Error(`${url.pathname} failed: ${what}`)
    await new Promise((r) => setTimeout(r, 1000 * 2 ** attempt))
  }
}

/** Every repo the host lists, page by page. */
export async function* listRepos(host: string, timeoutMs = 30_000): AsyncIterable<ListedRepo> {
  let cursor: string | undefined
  for (;;) {
    const url = new URL('/xrpc/com.atproto.sync.listRepos', host)
    url.searchParams.set('limit', '1000')
    if (cursor) url.searchParams.set('cursor', cursor)
    const page = (await getJson(url, timeoutMs)) as {
      cursor?: string
      repos?: { did?: unknown; rev?: unknown; active?: unknown }[]
    }
    const repos = page.repos ?? []
    for (const r of repos) {
      if (typeof r.did !== 'string' || !DID.test(r.did)) continue
      yield {
        did: r.did,
        rev: typeof r.rev === 'string' ? r.rev : undefined,
        active: r.active !== false,
      }
    }
    if (!page.cursor || !repos.length || page.cursor === cursor) return
    cursor = page.cursor
  }
}

/** The repos that hold at least one record of `collection`, from a relay that indexes it. */
export async function* listReposByCollection(
  host: string,
  collection: string,
  timeoutMs = 30_000,
): AsyncIterable<ListedRepo> {
  let cursor: string | undefined
  for (;;) {
    const url = new URL('/xrpc/com.atproto.sync.listReposByCollection', host)
    url.searchParams.set('collection', collection)
    url.searchParams.set('limit', '2000')
    if (cursor) url.searchParams.set('cursor', cursor)
    const page = (await getJson(url, timeoutMs)) as {
      cursor?: string
      repos?: { did?: unknown }[]
    }
    const repos = page.repos ?? []
    for (const r of repos) {
      if (typeof r.did === 'string' && DID.test(r.did)) yield { did: r.did, active: true }
    }
    if (!page.cursor || !repos.length || page.cursor === cursor) return
    cursor = page.cursor
  }
}

/** DIDs from a file: one per line, blank lines and `#` comments ignored; others are errors. */
export async function readDidList(path: string): Promise<string[]> {
  return parseDidList(await readFile(path, 'utf8'), path)
}

/** DIDs one per line (`#` starts a comment); `source` names where they came from in errors. */
export function parseDidList(text: string, source: string): string[] {
  const dids: string[] = []
  for (const [i, raw] of text.split('\n').entries()) {
    const line = raw.replace(/#.*/, '').trim()
    if (!line) continue
    if (!DID.test(line)) throw new Error(`${source}:${i + 1}: not a DID: ${line.slice(0, 80)}`)
    dids.push(line)
  }
  return dids
}
