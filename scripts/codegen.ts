// Generates packages/proto/src/gen from proto/bsky.proto with buf + protoc-gen-es/connect-es v1
// (the generator line @atproto/bsky itself is built with, so messages interoperate on the wire).
//   node scripts/codegen.ts           regenerate
//   node scripts/codegen.ts --check   exit 1 if the committed output differs from a fresh generation
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'

const root = path.resolve(import.meta.dirname, '..')
const bin = path.join(root, 'node_modules/.bin')
export const GEN_DIR = path.join(root, 'packages/proto/src/gen')

function generate(out: string): void {
  const opt = ['target=js+dts', 'import_extension=.js']
  const template = {
    version: 'v2',
    plugins: [
      { local: path.join(bin, 'protoc-gen-es'), out, opt },
      { local: path.join(bin, 'protoc-gen-connect-es'), out, opt },
    ],
  }
  execFileSync(
    path.join(bin, 'buf'),
    ['generate', 'proto', '--template', JSON.stringify(template)],
    {
      cwd: root,
      stdio: 'inherit',
      env: { ...process.env, PATH: `${bin}:${process.env.PATH ?? ''}` },
    },
  )
}

if (process.argv.includes('--check')) {
  const tmp = mkdtempSync(path.join(tmpdir(), 'openplane-codegen-'))
  try {
    generate(tmp)
    const stale = readdirSync(tmp).filter(
      (f) =>
        readFileSync(path.join(tmp, f), 'utf8') !== readFileSync(path.join(GEN_DIR, f), 'utf8'),
    )
    if (stale.length) {
      console.error(`generated code is out of date (${stale.join(', ')}): run \`pnpm codegen\``)
      process.exit(1)
    }
    console.log('packages/proto/src/gen matches proto/bsky.proto')
  } finally {
    rmSync(tmp, { recursive: true, force: true })
  }
} else {
  rmSync(GEN_DIR, { recursive: true, force: true })
  generate(GEN_DIR)
  console.log(`generated ${path.relative(process.cwd(), GEN_DIR)}`)
}
