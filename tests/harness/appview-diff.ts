// Calling the same XRPC endpoint on two stock AppViews (one on the stock dataplane, one on ours)
// and comparing what they answer: status and JSON body, walking cursors.
import { isDeepStrictEqual } from 'node:util'
import { expect } from 'vitest'
import type { StockNetwork } from './stock-network.ts'

export type Json = unknown
export type Params = Record<string, string | string[] | number | boolean | undefined>

/** Who calls: nobody, a user (a service JWT for them), or the AppView's admin. */
export type Caller = string | 'admin' | undefined

export interface Answer {
  status: number
  body: Json
}

export interface SameOptions {
  /** Fields holding the time each side applied something (bsync carries no time): set aside. */
  clock?: string[]
  /** POST with this body instead of a GET. */
  body?: Json
  /** Compare the status only: the body is the AppView's own configuration, not the data. */
  statusOnly?: boolean
}

export interface AppViewDiff {
  call(base: string, nsid: string, params: Params, caller?: Caller, body?: Json): Promise<Answer>
  /** Same status and JSON from both AppViews; returns the stock's answer. */
  same(nsid: string, params: Params, caller?: Caller, opts?: SameOptions): Promise<Answer>
  /** `same` page after page, following `cursor` (at most `pages`); returns the pages walked. */
  walk(
    nsid: string,
    params: Params,
    caller?: Caller,
    opts?: SameOptions & { pages?: number },
  ): Promise<number>
}

const ADMIN = `Basic ${Buffer.from('admin:admin-pass').toString('base64')}`

export function appViewDiff(net: StockNetwork, oursUrl: () => string): AppViewDiff {
  async function call(base: string, nsid: string, params: Params, caller?: Caller, body?: Json) {
    const url = new URL(`/xrpc/${nsid}`, base)
    for (const [k, v] of Object.entries(params)) {
      if (v === undefined) continue
      for (const one of Array.isArray(v) ? v : [v]) url.searchParams.append(k, String(one))
    }
    const headers: Record<string, string> =
      caller === 'admin'
        ? { authorization: ADMIN }
        : caller
          ? ((await net.network.serviceHeaders(caller as never, nsid)) as Record<string, string>)
          : {}
    const res = await fetch(url, {
      method: body === undefined ? 'GET' : 'POST',
      headers: body === undefined ? headers : { ...headers, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    })
    const text = await res.text()
    let parsed: Json = text
    try {
      parsed = text ? JSON.parse(text) : {}
    } catch {
      // Not JSON (an error page): compared as text.
    }
    return { status: res.status, body: parsed }
  }

  /** Both answers, compared; `oursParams`: what ours is asked, when it differs (its own cursor). */
  async function compare(
    nsid: string,
    params: Params,
    caller: Caller,
    opts: SameOptions,
    oursParams: Params = params,
  ): Promise<[Answer, Answer]> {
    const askStock = () => call(net.network.bsky.url, nsid, params, caller, opts.body)
    const askOurs = () => call(oursUrl(), nsid, oursParams, caller, opts.body)
    const clock = opts.clock ?? []
    const aside = (v: Json): Json =>
      Array.isArray(v)
        ? v.map(aside)
        : v && typeof v === 'object'
          ? Object.fromEntries(
              Object.entries(v).map(([k, x]) => [k, clock.includes(k) ? '<clock>' : aside(x)]),
            )
          : v
    const who = caller === 'admin' ? 'admin' : caller ? 'signed in' : 'anonymous'
    const shown = (a: Answer) => (opts.statusOnly ? undefined : aside(a.body))
    let [stock, ours] = await Promise.all([askStock(), askOurs()])
    // The AppView fails open on a few hydrations with a deadline of their own (known followers:
    // 100 ms), so on a loaded machine either side may leave a field out. A read answered apart is
    // asked again, one side at a time; a real difference stays. A POST is never asked twice.
    const apart = () =>
      stock.status !== ours.status || !isDeepStrictEqual(shown(stock), shown(ours))
    for (let again = 0; again < 2 && opts.body === undefined && apart(); again++) {
      stock = await askStock()
      ours = await askOurs()
    }
    expect({ nsid, params, who, status: ours.status, body: shown(ours) }).toEqual({
      nsid,
      params,
      who,
      status: stock.status,
      body: shown(stock),
    })
    return [stock, ours]
  }

  async function same(nsid: string, params: Params, caller?: Caller, opts: SameOptions = {}) {
    return (await compare(nsid, params, caller, opts))[0]
  }

  /**
   * Each side follows its own cursor: the same when cursors are data, each side's own when a
   * cursor is a time that side stamped (then `clock` names `cursor`).
   */
  async function walk(
    nsid: string,
    params: Params,
    caller?: Caller,
    opts: SameOptions & { pages?: number } = {},
  ) {
    const cursorOf = (a: Answer) => (a.body as { cursor?: string } | undefined)?.cursor
    let stockCursor: string | undefined
    let oursCursor: string | undefined
    let pages = 0
    for (; pages < (opts.pages ?? 20); pages++) {
      const [stock, ours] = await compare(
        nsid,
        stockCursor ? { ...params, cursor: stockCursor } : params,
        caller,
        opts,
        oursCursor ? { ...params, cursor: oursCursor } : params,
      )
      stockCursor = cursorOf(stock)
      oursCursor = cursorOf(ours)
      if (!stockCursor) return pages + 1
    }
    return pages
  }

  return { call, same, walk }
}

/** A write through the stock AppView (mutes, bookmarks, drafts… go through it into bsync). */
export async function act(net: StockNetwork, did: string, nsid: string, body: Json): Promise<Json> {
  const headers = await net.network.serviceHeaders(did as never, nsid)
  const res = await fetch(`${net.network.bsky.url}/xrpc/${nsid}`, {
    method: 'POST',
    headers: { ...headers, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  })
  if (!res.ok) throw new Error(`${nsid}: ${res.status} ${await res.text()}`)
  const text = await res.text()
  return text ? JSON.parse(text) : {}
}

export type BsyncHeads = { op?: string; mute?: string; notif?: string }

/**
 * Both dataplanes have applied the PDS's firehose and everything bsync holds: the stock's
 * through dev-env, ours through /_wait. Returns bsync's heads.
 */
export async function caughtUp(net: StockNetwork, dataplaneUrl: string): Promise<BsyncHeads> {
  await net.network.processAll()
  const heads = await net.network.bsync.getStreamHeads()
  const q = new URLSearchParams({
    timeoutMs: '60000',
    seq: String((await net.network.pds.ctx.sequencer.curr()) ?? 0),
  })
  if (heads.op) q.set('bsyncOp', heads.op)
  if (heads.mute) q.set('bsyncMute', heads.mute)
  if (heads.notif) q.set('bsyncNotif', heads.notif)
  const res = await fetch(`${dataplaneUrl}/_wait?${q}`)
  if (!res.ok) throw new Error(`/_wait: ${res.status} ${await res.text()}`)
  return heads
}
