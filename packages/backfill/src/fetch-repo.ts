// com.atproto.sync.getRepo from a PDS, as a stream of bytes (a repo can be larger than memory
// wants). Failures are sorted by what to do about them: gone (the repo is not there: do not
// retry now), rate limited (wait, then retry), transient (retry with backoff), refused (a
// malformed answer or a 4xx: give up for this run).
import { retryAtFrom } from './hosts.ts'

export type FetchFailure = 'gone' | 'rate-limited' | 'transient' | 'refused'

export class RepoFetchError extends Error {
  readonly kind: FetchFailure
  /** For rate-limited: when the host said to come back (ms epoch), if it did. */
  readonly retryAt: number | undefined

  constructor(kind: FetchFailure, message: string, retryAt?: number) {
    super(message)
    this.kind = kind
    this.retryAt = retryAt
  }
}

/** XRPC errors by which the PDS says the repo cannot be served (now or ever). */
const GONE = new Set([
  'RepoNotFound',
  'RepoTakendown',
  'RepoDeactivated',
  'RepoSuspended',
  'RepoDeleted',
])

export interface FetchOptions {
  /** Time to the answer's headers. */
  connectTimeoutMs: number
  /** Longest pause between two chunks of the body. */
  idleTimeoutMs: number
  signal?: AbortSignal
}

/** The repo's CAR as chunks; errors while streaming surface from the iterator as transient. */
export async function fetchRepo(
  pds: string,
  did: string,
  opts: FetchOptions,
): Promise<AsyncIterable<Uint8Array>> {
  const url = new URL('/xrpc/com.atproto.sync.getRepo', pds)
  url.searchParams.set('did', did)
  const abort = new AbortController()
  const onAbort = () => abort.abort(opts.signal?.reason)
  opts.signal?.addEventListener('abort', onAbort, { once: true })
  let timer = setTimeout(() => abort.abort(new Error('no answer in time')), opts.connectTimeoutMs)
  let res: Response
  try {
    res = await fetch(url, {
      signal: abort.signal,
      headers: { accept: 'application/vnd.ipld.car' },
    })
  } catch (err) {
    clearTimeout(timer)
    opts.signal?.removeEventListener('abort', onAbort)
    throw new RepoFetchError('transient', `getRepo failed: ${reasonOf(err, abort)}`)
  }
  if (!res.ok) {
    clearTimeout(timer)
    opts.signal?.removeEventListener('abort', onAbort)
    throw await failureOf(res)
  }
  const body = res.body
  if (!body) throw new RepoFetchError('refused', 'getRepo answered without a body')
  const idle = opts.idleTimeoutMs
  return {
    async *[Symbol.asyncIterator]() {
      try {
        for await (const chunk of body) {
          clearTimeout(timer)
          timer = setTimeout(() => abort.abort(new Error('body stalled')), idle)
          yield chunk
        }
      } catch (err) {
        throw new RepoFetchError('transient', `getRepo body failed: ${reasonOf(err, abort)}`)
      } finally {
        clearTimeout(timer)
        opts.signal?.removeEventListener('abort', onAbort)
        // A consumer that stops early (a malformed CAR) must not leave the socket open.
        if (!abort.signal.aborted) abort.abort(new Error('done'))
      }
    },
  }
}

async function failureOf(res: Response): Promise<RepoFetchError> {
  const text = await res.text().catch(() => '')
  let error = ''
  try {
    error = String((JSON.parse(text) as { error?: unknown }).error ?? '')
  } catch {
    // Not XRPC JSON: judged by status alone.
  }
  const what = `getRepo answered ${res.status}${error ? ` ${error}` : ''}`
  if (res.status === 429) return new RepoFetchError('rate-limited', what, retryAtFrom(res.headers))
  if (res.status === 404 || GONE.has(error)) return new RepoFetchError('gone', what)
  if (res.status >= 500 || res.status === 408) return new RepoFetchError('transient', what)
  return new RepoFetchError('refused', what)
}

function reasonOf(err: unknown, abort: AbortController): string {
  const reason: unknown = abort.signal.aborted ? abort.signal.reason : err
  return reason instanceof Error ? reason.message : String(reason)
}
