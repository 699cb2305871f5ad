// Compares two bsky.Service contracts method by method and field by field.
import {
  enumTypeOf,
  type EnumDesc,
  type FieldDesc,
  type MessageDesc,
  type ServiceDesc,
} from './stock-contract.ts'

export interface Contract {
  service: ServiceDesc
  /** Every exported value of the generated _pb module. */
  pb: Record<string, unknown>
}

function collect(pb: Record<string, unknown>) {
  const messages = new Map<string, MessageDesc>()
  const enums = new Map<string, EnumDesc>()
  for (const value of Object.values(pb)) {
    if (typeof value === 'function' && 'typeName' in value && 'fields' in value) {
      const m = value as unknown as MessageDesc
      messages.set(m.typeName, m)
    } else if (value && typeof value === 'object') {
      const e = enumTypeOf(value)
      if (e) enums.set(e.typeName, e)
    }
  }
  return { messages, enums }
}

function typeOf(kind: string, T: unknown): string {
  if (kind === 'scalar') return `scalar:${String(T)}`
  const t = T as { typeName?: string }
  if (kind === 'enum') return `enum:${t.typeName ?? enumTypeOf(T as object)?.typeName}`
  return `message:${t.typeName}`
}

function describe(f: FieldDesc): Record<string, string | boolean | number> {
  return {
    name: f.name,
    type: f.kind === 'map' ? `map<${f.K}, ${typeOf(f.V!.kind, f.V!.T)}>` : typeOf(f.kind, f.T),
    repeated: !!f.repeated,
    optional: !!f.opt,
    oneof: f.oneof?.name ?? '',
  }
}

/** Returns one line per difference; empty when the contracts are identical. */
export function diffContracts(expected: Contract, actual: Contract): string[] {
  const out: string[] = []
  if (expected.service.typeName !== actual.service.typeName) {
    out.push(`service name ${actual.service.typeName} != ${expected.service.typeName}`)
  }
  const methods = (s: ServiceDesc) => new Map(Object.values(s.methods).map((m) => [m.name, m]))
  const em = methods(expected.service)
  const am = methods(actual.service)
  for (const [name, m] of em) {
    const a = am.get(name)
    if (!a) out.push(`rpc ${name}: missing`)
    else {
      if (a.I.typeName !== m.I.typeName)
        out.push(`rpc ${name}: input ${a.I.typeName} != ${m.I.typeName}`)
      if (a.O.typeName !== m.O.typeName)
        out.push(`rpc ${name}: output ${a.O.typeName} != ${m.O.typeName}`)
      if (a.kind !== m.kind) out.push(`rpc ${name}: kind ${a.kind} != ${m.kind}`)
    }
  }
  for (const name of am.keys())
    if (!em.has(name)) out.push(`rpc ${name}: not in the stock contract`)

  const e = collect(expected.pb)
  const a = collect(actual.pb)
  for (const [typeName, msg] of e.messages) {
    const other = a.messages.get(typeName)
    if (!other) {
      out.push(`message ${typeName}: missing`)
      continue
    }
    const ours = new Map(other.fields.list().map((f) => [f.no, f]))
    for (const f of msg.fields.list()) {
      const o = ours.get(f.no)
      if (!o) {
        out.push(`${typeName}.${f.name} (#${f.no}): missing`)
        continue
      }
      const want = describe(f)
      const got = describe(o)
      for (const k of Object.keys(want)) {
        if (want[k] !== got[k]) out.push(`${typeName} #${f.no}: ${k} ${got[k]} != ${want[k]}`)
      }
      ours.delete(f.no)
    }
    for (const f of ours.values())
      out.push(`${typeName}.${f.name} (#${f.no}): not in the stock contract`)
  }
  for (const typeName of a.messages.keys()) {
    if (!e.messages.has(typeName)) out.push(`message ${typeName}: not in the stock contract`)
  }
  for (const [typeName, en] of e.enums) {
    const other = a.enums.get(typeName)
    if (!other) {
      out.push(`enum ${typeName}: missing`)
      continue
    }
    const key = (x: EnumDesc) => x.values.map((v) => `${v.no}=${v.name}`).join(',')
    if (key(en) !== key(other)) out.push(`enum ${typeName}: values ${key(other)} != ${key(en)}`)
  }
  for (const typeName of a.enums.keys()) {
    if (!e.enums.has(typeName)) out.push(`enum ${typeName}: not in the stock contract`)
  }
  return out
}
