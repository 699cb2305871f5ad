// Reading parameter, scenario and plan files, and writing scenario files; errors name the file.
import { once } from 'node:events'
import { createWriteStream } from 'node:fs'
import { readFile } from 'node:fs/promises'
import path from 'node:path'
import {
  parsePlan,
  parseScenarioParams,
  parseUserbaseParams,
  type PlanEntry,
  type ScenarioParams,
  type UserbaseParams,
} from './params.ts'
import { parseScenario, scenarioChunks, type Scenario } from './scenario.ts'
import { ParamError, parseJson } from './validate.ts'

async function readJson(file: string): Promise<unknown> {
  let text: string
  try {
    text = await readFile(file, 'utf8')
  } catch (err) {
    throw new ParamError(`${file}: cannot read (${(err as NodeJS.ErrnoException).code ?? err})`)
  }
  return parseJson(text, file)
}

/** Runs a parser, prefixing its error with the file name. */
async function parseFile<T>(file: string, parse: (value: unknown) => T): Promise<T> {
  const value = await readJson(file)
  try {
    return parse(value)
  } catch (err) {
    if (err instanceof ParamError) throw new ParamError(`${file}: ${err.message}`, { cause: err })
    throw err
  }
}

export const readUserbaseParams = (file: string): Promise<UserbaseParams> =>
  parseFile(file, (v) => parseUserbaseParams(v))

export const readScenarioParams = (file: string): Promise<ScenarioParams> =>
  parseFile(file, parseScenarioParams)

export const readScenario = (file: string): Promise<Scenario> =>
  parseFile(file, (v) => parseScenario(v))

/** A plan with each entry's path resolved against the plan file's directory. */
export async function readPlan(file: string): Promise<PlanEntry[]> {
  const plan = await parseFile(file, (v) => parsePlan(v))
  return plan.map((e) => ({ ...e, path: path.resolve(path.dirname(file), e.path) }))
}

export type FileKind = 'userbase' | 'scenario-params' | 'scenario' | 'plan'

/** Which kind of file a parsed JSON value is, from its top-level shape. */
export function detectKind(value: unknown): FileKind | undefined {
  if (Array.isArray(value)) return 'plan'
  if (typeof value !== 'object' || value === null) return undefined
  if ('num_users' in value) return 'userbase'
  if ('tiers' in value) return 'scenario-params'
  if ('posts' in value || 'sessions' in value || 'follows' in value) return 'scenario'
  return undefined
}

/** Validates any of the four file kinds; returns the kind. */
export async function checkFile(file: string): Promise<FileKind> {
  const value = await readJson(file)
  const kind = detectKind(value)
  if (!kind) {
    throw new ParamError(
      `${file}: not a userbase (num_users), scenario parameters (tiers), scenario ` +
        `(posts/sessions/follows) or plan (array)`,
    )
  }
  if (kind === 'userbase') await readUserbaseParams(file)
  else if (kind === 'scenario-params') await readScenarioParams(file)
  else if (kind === 'scenario') await readScenario(file)
  else {
    for (const entry of await readPlan(file)) await readScenario(entry.path)
  }
  return kind
}

/** Streams a scenario to a file (or stdout for "-"), honouring backpressure. */
export async function writeScenario(scenario: Scenario, file: string): Promise<void> {
  const out = file === '-' ? process.stdout : createWriteStream(file)
  for (const chunk of scenarioChunks(scenario)) {
    if (!out.write(chunk)) await once(out, 'drain')
  }
  if (out !== process.stdout) {
    out.end()
    await once(out, 'finish')
  }
}
