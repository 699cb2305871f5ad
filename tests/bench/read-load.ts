// An open-loop read load on a dataplane, shaped like what the AppView asks for when it renders a
// home timeline: the timeline itself, the profiles, counts and relationships of the authors on it,
// an author feed and a follower list. Requests leave on schedule whether or not earlier ones came
// back (a slow server is not spared load); each answer's code is tallied, and the tally can be
// read at any moment, so a run can tell what was answered during a fault and what after.
import { performance } from 'node:perf_hooks'
import { BasicHostList, createDataPlaneClient } from '@atproto/bsky'
import { Code, ConnectError } from '@connectrpc/connect'

type Client = ReturnType<typeof createDataPlaneClient>

/** Answers by code name ('ok', 'Unavailable', 'Unknown', …), and requests never sent. */
export type Tally = Map<string, number>

export interface ReadLoad {
  /** Answers so far (a copy). */
  tally(): Tally
  /** Milliseconds each `ok` answer took since the last call, in the order they came. */
  takeLatencies(): number[]
  /**
   * Why answers other than `ok` and refusals failed since the last call: `code: message` and
   * how many (the first distinct ones), to tell the server's answers from the client's own.
   */
  takeReasons(): Map<string, number>
  /** Stops sending, waits for the answers in flight, and returns the whole tally. */
  stop(): Promise<Tally>
}

/** Distinct failure reasons kept between two takeReasons calls. */
const MAX_REASONS = 20

/** Requests in flight at most: beyond, a request is counted as `dropped` instead of sent. */
const MAX_IN_FLIGHT = 2000

/**
 * Each request's deadline: an answer later than this is `DeadlineExceeded`, and no request stays
 * in flight for ever (a stream an overloaded connection never answers would hold `stop()`).
 */
const DEADLINE_MS = 10_000

/** The i-th request of the mix: what the AppView asks for a home timeline page, in turn. */
function requestFor(client: Client, readers: string[], i: number): Promise<unknown> {
  const did = readers[i % readers.length]!
  const others = Array.from({ length: 10 }, (_, k) => readers[(i * 31 + k * 977) % readers.length]!)
  const opts = { timeoutMs: DEADLINE_MS }
  switch (i % 6) {
    case 0:
      return client.getTimeline({ actorDid: did, limit: 50, cursor: '' }, opts)
    case 1:
      return client.getActors({ dids: others }, opts)
    case 2:
      return client.getCountsForUsers({ dids: others }, opts)
    case 3:
      return client.getRelationships({ actorDid: did, targetDids: others }, opts)
    case 4:
      return client.getAuthorFeed({ actorDid: did, limit: 30, cursor: '' }, opts)
    default:
      return client.getFollowers({ actorDid: did, limit: 50, cursor: '' }, opts)
  }
}

/**
 * The reads per second the dataplane answers ok with `concurrency` callers each asking again as
 * soon as answered (a closed loop: never more in flight than that, so nothing is refused for
 * overload and the figure is its capacity for this mix, not what it refuses at).
 */
export async function readCapacity(
  dataplaneUrl: string,
  readers: string[],
  concurrency: number,
  ms: number,
): Promise<{ rps: number; tally: Tally }> {
  const client: Client = createDataPlaneClient(new BasicHostList([dataplaneUrl]), {
    httpVersion: '2',
  })
  const tally: Tally = new Map()
  let next = 0
  const end = performance.now() + ms
  const caller = async () => {
    while (performance.now() < end) {
      const code = await requestFor(client, readers, next++).then(
        () => 'ok',
        (err: unknown) => Code[ConnectError.from(err).code] ?? 'other',
      )
      tally.set(code, (tally.get(code) ?? 0) + 1)
    }
  }
  await Promise.all(Array.from({ length: concurrency }, caller))
  return { rps: (tally.get('ok') ?? 0) / (ms / 1000), tally }
}

export function readLoad(dataplaneUrl: string, readers: string[], rate: number): ReadLoad {
  const client: Client = createDataPlaneClient(new BasicHostList([dataplaneUrl]), {
    httpVersion: '2',
  })
  const tally: Tally = new Map()
  const count = (code: string) => tally.set(code, (tally.get(code) ?? 0) + 1)
  const inFlight = new Set<Promise<void>>()
  let latencies: number[] = []
  let reasons = new Map<string, number>()
  const failed = (err: unknown) => {
    const e = ConnectError.from(err)
    const code = Code[e.code] ?? 'other'
    count(code)
    if (e.code === Code.ResourceExhausted) return
    const reason = `${code}: ${e.rawMessage.slice(0, 160)}`
    if (reasons.has(reason) || reasons.size < MAX_REASONS) {
      reasons.set(reason, (reasons.get(reason) ?? 0) + 1)
    }
  }
  let sent = 0
  let stopped = false
  const t0 = performance.now()

  const request = (i: number) => requestFor(client, readers, i)

  let timer: NodeJS.Timeout | undefined
  const tick = () => {
    const due = Math.floor(((performance.now() - t0) / 1000) * rate)
    while (!stopped && sent < due) {
      const i = sent++
      if (inFlight.size >= MAX_IN_FLIGHT) {
        count('dropped')
        continue
      }
      const sentAt = performance.now()
      const p: Promise<void> = request(i)
        .then(
          () => {
            count('ok')
            latencies.push(performance.now() - sentAt)
          },
          (err: unknown) => failed(err),
        )
        .finally(() => inFlight.delete(p))
      inFlight.add(p)
    }
    if (stopped) return
    // Sleep until the next request is due (no spinning: the load shares the cores).
    const next = t0 + ((sent + 1) / rate) * 1000
    timer = setTimeout(tick, Math.max(1, next - performance.now()))
  }
  tick()

  return {
    tally: () => new Map(tally),
    takeLatencies() {
      const out = latencies
      latencies = []
      return out
    },
    takeReasons() {
      const out = reasons
      reasons = new Map()
      return out
    },
    async stop() {
      stopped = true
      clearTimeout(timer)
      // Every request has its deadline; one its client never settles counts as `unanswered`.
      let giveUp: NodeJS.Timeout | undefined
      const waited = await Promise.race([
        Promise.all(inFlight).then(() => true),
        new Promise<boolean>((r) => (giveUp = setTimeout(() => r(false), DEADLINE_MS + 5_000))),
      ])
      clearTimeout(giveUp)
      const out = new Map(tally)
      if (!waited && inFlight.size) out.set('unanswered', inFlight.size)
      return out
    },
  }
}

/** `after` minus `before`, code by code. */
export function tallyBetween(before: Tally, after: Tally): Tally {
  const out: Tally = new Map()
  for (const [code, n] of after) {
    const d = n - (before.get(code) ?? 0)
    if (d) out.set(code, d)
  }
  return out
}

export function formatTally(t: Tally): string {
  return [...t].map(([code, n]) => `${code} ${n}`).join(', ') || 'none'
}
