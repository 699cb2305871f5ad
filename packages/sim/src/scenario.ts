// Scenario files: timed user actions, generated or hand-written, in the seed toolkit's shape:
// { posts: [{user_id, offset_ms}], sessions: [{user_id, duration_ms, offset_ms}],
//   follows: [{user_id, subject_id, offset_ms}] }, every series optional.
import { checkArray, Fields, ParamError } from './validate.ts'

export interface PostEvent {
  user_id: number
  offset_ms: number
}

export interface SessionEvent {
  user_id: number
  duration_ms: number
  offset_ms: number
}

export interface FollowEvent {
  user_id: number
  subject_id: number
  offset_ms: number
}

export interface Scenario {
  posts?: PostEvent[]
  sessions?: SessionEvent[]
  follows?: FollowEvent[]
}

const SERIES = ['posts', 'sessions', 'follows'] as const

export function parseScenario(value: unknown, root = 'scenario'): Scenario {
  const f = new Fields(root, value)
  const scenario: Scenario = {}
  const items = (key: string): Fields[] | undefined => {
    const value = f.raw(key)
    if (value === undefined) return undefined
    return checkArray(`${root}.${key}`, value, false).map(
      (item, i) => new Fields(`${root}.${key}[${i}]`, item),
    )
  }
  const close = <T>(item: Fields, event: T): T => {
    item.done()
    return event
  }
  scenario.posts = items('posts')?.map((e) =>
    close(e, { user_id: e.number('user_id', 'positive-int'), offset_ms: offset(e) }),
  )
  scenario.sessions = items('sessions')?.map((e) =>
    close(e, {
      user_id: e.number('user_id', 'positive-int'),
      duration_ms: e.number('duration_ms', 'positive-int'),
      offset_ms: offset(e),
    }),
  )
  scenario.follows = items('follows')?.map((e) => {
    const event = {
      user_id: e.number('user_id', 'positive-int'),
      subject_id: e.number('subject_id', 'positive-int'),
      offset_ms: offset(e),
    }
    if (event.subject_id === event.user_id) {
      throw new ParamError(`${e.path}.subject_id must differ from user_id, got ${event.user_id}`)
    }
    return close(e, event)
  })
  f.done()
  for (const key of SERIES) if (scenario[key] === undefined) delete scenario[key]
  if (Object.keys(scenario).length === 0) {
    throw new ParamError(`${root} must have at least one of ${SERIES.join(', ')}`)
  }
  return scenario
}

const offset = (e: Fields): number => e.number('offset_ms', 'nonnegative-int')

/** One event on one line, spaced as prettier formats JSON, so checked-in scenarios stay stable. */
function formatEvent(event: object): string {
  const fields = Object.entries(event).map(([k, v]) => `"${k}": ${JSON.stringify(v)}`)
  return `{ ${fields.join(', ')} }`
}

/** Scenario JSON in pieces (one event per line), so large scenarios stream to a file. */
export function* scenarioChunks(scenario: Scenario): Generator<string> {
  const present = SERIES.filter((key) => scenario[key] !== undefined)
  yield '{\n'
  for (const [s, key] of present.entries()) {
    const events: readonly object[] = scenario[key] ?? []
    yield `  "${key}": [`
    let line = ''
    for (const [i, event] of events.entries()) {
      line += `${i === 0 ? '\n' : ',\n'}    ${formatEvent(event)}`
      if (line.length > 65536) {
        yield line
        line = ''
      }
    }
    yield `${line}${events.length > 0 ? '\n  ' : ''}]${s < present.length - 1 ? ',' : ''}\n`
  }
  yield '}\n'
}

export function serializeScenario(scenario: Scenario): string {
  return [...scenarioChunks(scenario)].join('')
}

/** Orders events by time, then user, then the rest: the order a run dispatches them in. */
export function byOffset<T extends { offset_ms: number; user_id: number }>(a: T, b: T): number {
  return a.offset_ms - b.offset_ms || a.user_id - b.user_id
}

/** Unites several scenarios into one, each series re-sorted by offset. */
export function mergeScenarios(parts: Scenario[]): Scenario {
  const merged: Scenario = {}
  if (parts.some((p) => p.posts)) merged.posts = parts.flatMap((p) => p.posts ?? []).sort(byOffset)
  if (parts.some((p) => p.sessions)) {
    merged.sessions = parts
      .flatMap((p) => p.sessions ?? [])
      .sort((a, b) => byOffset(a, b) || a.duration_ms - b.duration_ms)
  }
  if (parts.some((p) => p.follows)) {
    merged.follows = parts
      .flatMap((p) => p.follows ?? [])
      .sort((a, b) => byOffset(a, b) || a.subject_id - b.subject_id)
  }
  return merged
}
