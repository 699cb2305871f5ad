// Field-by-field checks of parsed JSON. Every message names the field by its path
// (`userbase.follower_density`, `posts.tiers[2].max_followers`) and shows the offending value.

export class ParamError extends Error {
  override name = 'ParamError'
}

export type NumberRule = 'positive' | 'nonnegative' | 'positive-int' | 'nonnegative-int'

const RULE_TEXT: Record<NumberRule, string> = {
  positive: 'a positive number',
  nonnegative: 'a non-negative number',
  'positive-int': 'a positive integer',
  'nonnegative-int': 'a non-negative integer',
}

export function show(value: unknown): string {
  if (value === undefined) return 'nothing'
  const json = JSON.stringify(value)
  return json.length > 60 ? `${json.slice(0, 57)}...` : json
}

function satisfies(value: unknown, rule: NumberRule): value is number {
  if (typeof value !== 'number' || !Number.isFinite(value)) return false
  if (rule.endsWith('-int') && !Number.isSafeInteger(value)) return false
  return rule.startsWith('positive') ? value > 0 : value >= 0
}

export function checkNumber(path: string, value: unknown, rule: NumberRule): number {
  if (!satisfies(value, rule)) {
    throw new ParamError(`${path} must be ${RULE_TEXT[rule]}, got ${show(value)}`)
  }
  return value
}

export function checkArray(path: string, value: unknown, nonEmpty = true): unknown[] {
  if (!Array.isArray(value)) throw new ParamError(`${path} must be an array, got ${show(value)}`)
  if (nonEmpty && value.length === 0) throw new ParamError(`${path} must not be empty`)
  return value
}

/** Reads the fields of one JSON object; `done()` rejects any field nobody asked for (typos). */
export class Fields {
  readonly path: string
  private readonly obj: Record<string, unknown>
  private readonly seen = new Set<string>()

  constructor(path: string, value: unknown) {
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      throw new ParamError(`${path} must be an object, got ${show(value)}`)
    }
    this.path = path
    this.obj = value as Record<string, unknown>
  }

  has(key: string): boolean {
    return this.obj[key] !== undefined
  }

  raw(key: string): unknown {
    this.seen.add(key)
    return this.obj[key]
  }

  number(key: string, rule: NumberRule, fallback?: number): number {
    const value = this.raw(key)
    if (value === undefined) {
      if (fallback !== undefined) return fallback
      throw new ParamError(`${this.path}.${key} is required (${RULE_TEXT[rule]})`)
    }
    return checkNumber(`${this.path}.${key}`, value, rule)
  }

  string(key: string, fallback?: string): string {
    const value = this.raw(key)
    if (value === undefined && fallback !== undefined) return fallback
    if (typeof value !== 'string' || value.length === 0) {
      if (value === undefined) throw new ParamError(`${this.path}.${key} is required (a string)`)
      throw new ParamError(`${this.path}.${key} must be a non-empty string, got ${show(value)}`)
    }
    return value
  }

  array(key: string, nonEmpty = true): unknown[] {
    const value = this.raw(key)
    if (value === undefined) throw new ParamError(`${this.path}.${key} is required (an array)`)
    return checkArray(`${this.path}.${key}`, value, nonEmpty)
  }

  done(): void {
    for (const key of Object.keys(this.obj)) {
      if (!this.seen.has(key)) {
        const known = [...this.seen].join(', ')
        throw new ParamError(`${this.path}.${key} is not a known field (known: ${known})`)
      }
    }
  }
}

/** Parses JSON text, naming the file on a syntax error. */
export function parseJson(text: string, source: string): unknown {
  try {
    return JSON.parse(text) as unknown
  } catch (err) {
    throw new ParamError(`${source}: not valid JSON (${(err as Error).message})`, { cause: err })
  }
}
