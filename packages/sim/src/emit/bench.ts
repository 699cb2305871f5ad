// node packages/sim/src/emit/bench.ts — how fast LocalNetwork turns posts and follows into signed
// firehose commits, alone and with a consumer reading every frame over a WebSocket.
//   EMIT_EVENTS (default 20000), EMIT_USERS (active users, default 2000), EMIT_CONSUMER (1/0),
//   EMIT_SIGNERS (signing worker threads, default 0)
import { performance } from 'node:perf_hooks'
import { LocalNetwork } from './index.ts'

const EVENTS = Number(process.env.EMIT_EVENTS ?? 20_000)
const ACTIVE = Number(process.env.EMIT_USERS ?? 2000)
const CONSUMER = (process.env.EMIT_CONSUMER ?? '1') !== '0'
const SIGNERS = Number(process.env.EMIT_SIGNERS ?? 0)
const USERS = 100_000

const net = await LocalNetwork.start({
  seed: 1,
  users: USERS,
  backlog: EVENTS + 10,
  signers: SIGNERS,
})
let received = 0
let bytes = 0
let ws: WebSocket | undefined
if (CONSUMER) {
  ws = new WebSocket(`${net.url}/xrpc/com.atproto.sync.subscribeRepos`)
  ws.binaryType = 'arraybuffer'
  ws.onmessage = (m: { data: ArrayBuffer }) => {
    received++
    bytes += m.data.byteLength
  }
  await new Promise((resolve) => (ws!.onopen = resolve))
}

const heap0 = process.memoryUsage().heapUsed
const t0 = performance.now()
// Users drawn so small ids act more (a rough power law), in flights of 64 un-awaited calls.
let state = 12345
const rand = () => (state = (Math.imul(state, 1103515245) + 12345) >>> 0) / 2 ** 32
const user = () => 1 + Math.floor(ACTIVE * rand() ** 2)
for (let i = 0; i < EVENTS; i += 64) {
  const flight: Promise<unknown>[] = []
  for (let j = i; j < Math.min(EVENTS, i + 64); j++) {
    const u = user()
    if (j % 10 === 9) flight.push(net.follow(u, 1 + ((u + j) % USERS)))
    else flight.push(net.post(u, { text: `bench post ${j}` }))
  }
  await Promise.all(flight)
}
const emitMs = performance.now() - t0
while (CONSUMER && received < EVENTS) await new Promise((r) => setTimeout(r, 5))
const totalMs = performance.now() - t0
const heap = process.memoryUsage().heapUsed - heap0

console.log(`events: ${EVENTS} by ${net.activeUsers} users (seq ${net.seq}), signers: ${SIGNERS}`)
console.log(`emitted: ${((EVENTS / emitMs) * 1000).toFixed(0)} events/s (${emitMs.toFixed(0)} ms)`)
if (CONSUMER) {
  console.log(
    `received by one consumer: ${((received / totalMs) * 1000).toFixed(0)} events/s, ` +
      `${(bytes / received).toFixed(0)} bytes/frame`,
  )
}
console.log(`heap growth: ${(heap / 2 ** 20).toFixed(1)} MiB incl. backlog of ${EVENTS} frames`)
ws?.close()
await net.close()
