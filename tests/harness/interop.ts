// The protocol's interop vectors shipped under tests/fixtures/interop (CC0, README there).
import { readFileSync } from 'node:fs'
import path from 'node:path'

const SYNTAX = path.resolve(import.meta.dirname, '../fixtures/interop/syntax')

/** Every vector of a syntax file (`did_syntax_valid`, …): comments and empty lines left out, nothing trimmed. */
export function syntaxVectors(name: string): string[] {
  return readFileSync(path.join(SYNTAX, `${name}.txt`), 'utf8')
    .split('\n')
    .map((l) => l.replace(/\r$/, ''))
    .filter((l) => l.length > 0 && !l.startsWith('#'))
}
