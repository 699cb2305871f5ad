// Log lines: JSON for shippers unless asked for readable ones (LOG_FORMAT=pretty, or a terminal),
// and a bad LOG_FORMAT refused by name. Each case is a fresh process: the format is chosen once,
// when the logger is made.
import { execFile } from 'node:child_process'
import path from 'node:path'
import { promisify } from 'node:util'
import { describe, expect, it } from 'vitest'

const run = promisify(execFile)
const root = path.resolve(import.meta.dirname, '../..')
const script =
  "const { childLogger } = await import('@openplane/telemetry');" +
  "childLogger('start').info({ port: 2585 }, 'bsky.Service listening')"

async function logOnce(format: string | undefined): Promise<{ stdout: string; stderr: string }> {
  const env: NodeJS.ProcessEnv = { ...process.env, LOG_LEVEL: 'info' }
  delete env.VITEST
  delete env.LOG_FORMAT
  if (format !== undefined) env.LOG_FORMAT = format
  return run(process.execPath, ['--input-type=module', '-e', script], {
    cwd: path.join(root, 'packages/cli'),
    env,
  }).catch((err: { stdout: string; stderr: string }) => err)
}

describe('log format', () => {
  it('writes JSON lines when not on a terminal', async () => {
    const { stdout } = await logOnce(undefined)
    expect(JSON.parse(stdout.trim())).toMatchObject({
      level: 30,
      service: 'openplane',
      component: 'start',
      port: 2585,
      msg: 'bsky.Service listening',
    })
  })

  it('writes readable lines with LOG_FORMAT=pretty', async () => {
    const { stdout } = await logOnce('pretty')
    expect(stdout.trim()).toMatch(
      /^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: \[start\] bsky\.Service listening \{"port":2585\}$/,
    )
  })

  it('refuses an unknown LOG_FORMAT by name', async () => {
    const { stderr } = await logOnce('xml')
    expect(stderr).toMatch(/LOG_FORMAT must be json or pretty, got "xml"/)
  })
})
