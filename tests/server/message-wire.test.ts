// The answers' encoder (wire/message.ts) writes the bytes protobuf-es writes: every
// rpc's answer type, filled with random partial answers (fields left out, defaults, oneofs,
// maps, int64s, nested plain objects and message instances), byte for byte.
import {
  ScalarType,
  LongType,
  type AnyMessage,
  type FieldInfo,
  type MessageType,
} from '@bufbuild/protobuf'
import { describe, expect, it } from 'vitest'
import { Service } from '@openplane/proto'
import { encodeMessage } from '../../packages/server/src/wire/message.ts'

/** A small deterministic generator (mulberry32), so a failure reproduces. */
function rng(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

function filler(random: () => number) {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!
  const int = (lo: number, hi: number) => lo + Math.floor(random() * (hi - lo + 1))

  const scalar = (type: ScalarType, long: LongType | undefined): unknown => {
    const zero = random() < 0.3
    switch (type) {
      case ScalarType.STRING:
        return zero ? '' : pick(['a', 'did:plc:xyz', 'é🙂', 'at://x/app.bsky.feed.post/3k'])
      case ScalarType.BYTES:
        return zero ? new Uint8Array() : Uint8Array.from({ length: int(1, 40) }, () => int(0, 255))
      case ScalarType.BOOL:
        return !zero && random() < 0.5
      case ScalarType.INT64:
      case ScalarType.SINT64:
      case ScalarType.SFIXED64: {
        const v = zero ? 0n : BigInt(int(-1e9, 1e9)) * BigInt(int(1, 1e6))
        return long === LongType.STRING ? v.toString() : v
      }
      case ScalarType.UINT64:
      case ScalarType.FIXED64: {
        const v = zero ? 0n : BigInt(int(0, 1e9)) * BigInt(int(1, 1e6))
        return long === LongType.STRING ? v.toString() : v
      }
      case ScalarType.DOUBLE:
        return zero ? 0 : (random() - 0.5) * 1e6
      case ScalarType.FLOAT:
        return zero ? 0 : int(-1000, 1000) / 4
      case ScalarType.UINT32:
      case ScalarType.FIXED32:
        return zero ? 0 : int(0, 2 ** 31)
      default:
        return zero ? 0 : int(-(2 ** 31), 2 ** 31 - 1)
    }
  }

  const single = (field: FieldInfo, depth: number): unknown => {
    switch (field.kind) {
      case 'scalar':
        return scalar(field.T, field.L)
      case 'enum':
        return pick(field.T.values).no
      case 'message':
        return message(field.T, depth + 1)
      case 'map': {
        const out: Record<string, unknown> = {}
        for (let i = int(0, 2); i > 0; i--) {
          const key = String(scalar(field.K, LongType.STRING) ?? 'k') || `k${i}`
          out[key] =
            field.V.kind === 'message'
              ? message(field.V.T, depth + 1)
              : field.V.kind === 'enum'
                ? pick(field.V.T.values).no
                : scalar(field.V.T, LongType.BIGINT)
        }
        return out
      }
    }
  }

  /** A partial answer: some fields left out; nested ones plain or message instances. */
  const message = (type: MessageType<AnyMessage>, depth = 0): Record<string, unknown> => {
    const out: Record<string, unknown> = {}
    for (const field of type.fields.list()) {
      if (random() < 0.2 || (depth > 3 && field.kind === 'message')) continue
      if (field.oneof) {
        if (out[field.oneof.localName] === undefined || random() < 0.3) {
          out[field.oneof.localName] =
            random() < 0.2
              ? { case: undefined }
              : { case: field.localName, value: single(field, depth) }
        }
        continue
      }
      out[field.localName] = field.repeated
        ? Array.from({ length: int(0, 3) }, () => single(field, depth))
        : single(field, depth)
    }
    return random() < 0.2 && depth > 0 ? (new type(out) as unknown as Record<string, unknown>) : out
  }
  return message
}

describe('answer encoding', () => {
  const outputs = Object.values(Service.methods).map((m) => m.O as MessageType<AnyMessage>)

  it('writes the bytes protobuf-es writes, for every rpc answer type', () => {
    const message = filler(rng(42))
    let compared = 0
    for (const type of outputs) {
      for (let i = 0; i < 40; i++) {
        const answer = message(type)
        const expected = new type(answer).toBinary()
        const got = encodeMessage(type, answer)
        if (Buffer.compare(Buffer.from(got), Buffer.from(expected)) !== 0) {
          throw new Error(`${type.typeName} #${i}: bytes differ`)
        }
        compared++
      }
    }
    expect(outputs.length).toBeGreaterThan(100)
    expect(compared).toBe(outputs.length * 40)
  })

  it('encodes a message instance as it is', () => {
    const type = Service.methods.getActors.O as MessageType<AnyMessage>
    const instance = new type(filler(rng(7))(type))
    expect(Buffer.from(encodeMessage(type, instance))).toEqual(Buffer.from(instance.toBinary()))
  })
})
