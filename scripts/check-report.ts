// Renders a simulation report in headless Chromium and saves a screenshot, to look at the layout.
//   node scripts/check-report.ts                      a demo comparison report (synthetic data)
//   node scripts/check-report.ts <report.html>        an existing report
//   node scripts/check-report.ts <run-dir> [<run-dir>] re-render from run.json, then shoot
// Prints the PNG path. Needs Chromium (CHROMIUM=/path, else /usr/bin/chromium or chromium on PATH).
import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, statSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { demoRunData } from '../packages/sim/src/report/demo.ts'
import { renderReport } from '../packages/sim/src/report/html.ts'
import { readRunData } from '../packages/sim/src/run/data.ts'

const root = path.resolve(import.meta.dirname, '..')
const outDir = path.join(root, '.tmp', 'check-report')
mkdirSync(outDir, { recursive: true })

async function reportFile(args: string[]): Promise<string> {
  if (args.length === 1 && args[0]!.endsWith('.html')) return path.resolve(args[0]!)
  const runs =
    args.length > 0
      ? await Promise.all(args.map((dir) => readRunData(dir)))
      : [
          demoRunData({ label: 'stock', seed: 1, baseMs: 6, loadMs: 5, peakRps: 620 }),
          demoRunData({ label: 'openplane', seed: 2, baseMs: 0.8, loadMs: 0.1, peakRps: 800 }),
        ]
  const file = path.join(outDir, args.length > 0 ? 'report.html' : 'demo.html')
  writeFileSync(file, renderReport(runs))
  return file
}

function chromium(): string {
  const candidates = [process.env.CHROMIUM, '/usr/bin/chromium', '/usr/bin/chromium-browser']
  const found = candidates.find((c) => c && existsSync(c))
  if (found) return found
  throw new Error('Chromium not found: set CHROMIUM or install it (apt-get install -y chromium)')
}

const html = await reportFile(process.argv.slice(2))
const png = path.join(outDir, `${path.basename(html, '.html')}.png`)
execFileSync(
  chromium(),
  [
    '--headless',
    '--no-sandbox',
    '--disable-gpu',
    '--hide-scrollbars',
    `--screenshot=${png}`,
    '--window-size=1400,2400',
    `file://${html}`,
  ],
  { stdio: ['ignore', 'ignore', 'pipe'], timeout: 60_000 },
)
if (!existsSync(png) || statSync(png).size === 0) throw new Error(`no screenshot written to ${png}`)
console.log(png)
