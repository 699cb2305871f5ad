// Loads the bsky.Service contract that the pinned @atproto/bsky ships. The package ships generated
// protobuf-es v1 code (not the .proto), so its runtime descriptors are the source of truth.
import { readFile } from 'node:fs/promises'
import { createRequire } from 'node:module'
import path from 'node:path'

export interface FieldDesc {
  no: number
  name: string
  kind: 'scalar' | 'enum' | 'message' | 'map'
  T?: unknown
  K?: number
  V?: { kind: string; T: unknown }
  repeated?: boolean
  opt?: boolean
  oneof?: { name: string }
}
export interface MessageDesc {
  typeName: string
  fields: { list(): readonly FieldDesc[] }
}
export interface EnumDesc {
  typeName: string
  values: readonly { no: number; name: string }[]
}
export interface MethodDesc {
  name: string
  I: MessageDesc
  O: MessageDesc
  kind: number
}
export interface ServiceDesc {
  typeName: string
  methods: Record<string, MethodDesc>
}

export interface StockContract {
  version: string
  dir: string
  service: ServiceDesc
  /** Message and enum declarations in file order. */
  messages: MessageDesc[]
  enums: EnumDesc[]
  pbSource: string
  /** Every exported value of the generated _pb module. */
  pb: Record<string, unknown>
}

export async function stockPackageDir(): Promise<string> {
  const pkgJson = createRequire(import.meta.filename).resolve('@atproto/bsky/package.json')
  return path.dirname(pkgJson)
}

/** The contracts the pinned package ships: the dataplane's, and bsync's (which we consume). */
export type ContractName = 'bsky' | 'bsync'

/**
 * A contract as `dir` (an @atproto/bsky package; default: the pinned one) ships it. Its generated
 * code imports @bufbuild/protobuf: a package unpacked elsewhere must sit where Node resolves that
 * from this repository (under it).
 */
export async function loadStockContract(
  name: ContractName = 'bsky',
  dir?: string,
): Promise<StockContract> {
  dir ??= await stockPackageDir()
  const version = JSON.parse(await readFile(path.join(dir, 'package.json'), 'utf8'))
    .version as string
  const pbFile = path.join(dir, `dist/proto/${name}_pb.js`)
  const pbSource = await readFile(pbFile, 'utf8')
  const pb = (await import(pbFile)) as Record<string, unknown>
  const connect = (await import(path.join(dir, `dist/proto/${name}_connect.js`))) as {
    Service: ServiceDesc
  }

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
  // File order, as the generator emitted it, keeps the written .proto readable and stable.
  const order = [...pbSource.matchAll(/@generated from (message|enum) ([\w.]+)/g)].map((m) => m[2]!)
  const byOrder = <T>(map: Map<string, T>) =>
    order.filter((n) => map.has(n)).map((n) => map.get(n)!) as T[]
  return {
    version,
    dir,
    service: connect.Service,
    messages: byOrder(messages),
    enums: byOrder(enums),
    pbSource,
    pb,
  }
}

/** protobuf-es v1 keeps an enum's descriptor under a private symbol on the enum object. */
export function enumTypeOf(value: object): EnumDesc | undefined {
  for (const sym of Object.getOwnPropertySymbols(value)) {
    const t = (value as Record<symbol, unknown>)[sym] as Partial<EnumDesc> | undefined
    if (t && typeof t.typeName === 'string' && Array.isArray(t.values)) return t as EnumDesc
  }
  return undefined
}
