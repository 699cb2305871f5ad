// The identifiers a request names on its own (not in a list) — an actor's DID, a post's or a
// list's at:// uri, a handle — are checked before its route runs, with the protocol's syntax
// rules (@atproto/syntax, the rules the interop vectors test). One that is not valid is the
// caller's mistake, answered `invalid_argument` naming the field, never a lookup that finds
// nothing or an internal error. Identifiers inside lists are looked up as the stock looks them
// up (an invalid one is simply not found), so lists are left alone. Empty fields are optional
// ones left unset.
import type { AnyMessage, MessageType } from '@bufbuild/protobuf'
import { ScalarType } from '@bufbuild/protobuf'
import { Code, ConnectError } from '@connectrpc/connect'
import { isAtUriString, isValidDid, isValidHandle } from '@atproto/syntax'

interface Rule {
  /** Which string fields the rule applies to, by their (camelCase) name. */
  field: (name: string) => boolean
  valid: (value: string) => boolean
  what: string
}

const RULES: Rule[] = [
  { field: (n) => n === 'did' || n.endsWith('Did'), valid: isValidDid, what: 'a DID' },
  { field: (n) => n.endsWith('Uri'), valid: (v) => isAtUriString(v), what: 'an at:// uri' },
  { field: (n) => n === 'handle', valid: isValidHandle, what: 'a handle' },
]

/** The check for a method's request, or undefined when it names no identifier on its own. */
export function subjectCheck(
  input: MessageType<AnyMessage>,
): ((req: AnyMessage) => void) | undefined {
  const checks: { name: string; rule: Rule }[] = []
  for (const field of input.fields.list()) {
    if (field.kind !== 'scalar' || field.T !== ScalarType.STRING || field.repeated) continue
    const rule = RULES.find((r) => r.field(field.localName))
    if (rule) checks.push({ name: field.localName, rule })
  }
  if (!checks.length) return undefined
  return (req) => {
    for (const { name, rule } of checks) {
      const value = (req as Record<string, unknown>)[name]
      if (typeof value !== 'string' || value === '' || rule.valid(value)) continue
      // The value is not echoed: it may hold anything (NUL, control characters), and the field
      // is what the caller needs to find it.
      throw new ConnectError(`${name} is not ${rule.what}`, Code.InvalidArgument)
    }
  }
}
