// pnpm bench:read-floor — what the parts of a read cost on this machine with nothing of ours in
// them: a loopback TCP round trip to Redis (raw PING), the same through ioredis, a trivial
// Postgres query through pg, and a minimal node:http2 server answering gRPC-shaped calls (a
// 60-byte request, a 4 KB answer, trailers). A GetTimeline read is one HTTP/2 call answered
// with one Redis round trip, so these bound how low its CPU and latency can go in Node here.
// Prints µs per call: wall time, and the CPU of the measuring process (for the HTTP/2 server,
// of the server process), sequential and 16 at a time. Then the HTTP/2 server's CPU per call
// when calls come at fixed rates, as bench:timeline offers them (there a read finds the server
// idle more often than back to back, and pays for its wake-ups), bare and with one ioredis GET
// before each answer: the floor of a read's CPU at those rates. Not part of CI.
//
//   BENCH_CALLS   calls per measurement (default 5000)
//   BENCH_RATES   rates for the paced calls, calls/s (default 800,1600,2000)
//   BENCH_SECONDS seconds per paced rate (default 10)
import { fork } from 'node:child_process'
import http from 'node:http'
import http2 from 'node:http2'
import net from 'node:net'
import { performance } from 'node:perf_hooks'
import { Redis } from 'ioredis'
import pg from 'pg'
import { PG_URL, REDIS_HOST } from '../harness/env.ts'
import { step } from './open-loop.ts'

const CALLS = Number(process.env.BENCH_CALLS ?? 5000)
const RATES = (process.env.BENCH_RATES ?? '800,1600,2000').split(',').map(Number)
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10)
const [redisHost = '127.0.0.1', redisPort = '6379'] = REDIS_HOST.split(':')

type Call = () => Promise<unknown>

/** µs per call (wall, and CPU from `cpu`), `concurrency` calls in flight. */
async function measure(call: Call, concurrency: number, cpu: () => Promise<number>) {
  for (let i = 0; i < 500; i++) await call()
  const c0 = await cpu()
  const t0 = performance.now()
  let n = 0
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (n++ < CALLS) await call()
    }),
  )
  const wall = ((performance.now() - t0) * 1000) / CALLS
  return { wall, cpu: ((await cpu()) - c0) / CALLS }
}

const ownCpu = async () => {
  const u = process.cpuUsage()
  return u.user + u.system
}

/**
 * The server's CPU per call, in µs, with calls offered at `rate` a second for `SECONDS` by the
 * read benchmarks' own open loop, and the calls' p50 and p99 in µs.
 */
async function paced(call: Call, rate: number, cpu: () => Promise<number>) {
  for (let i = 0; i < 500; i++) await call()
  const c0 = await cpu()
  const r = await step(call, ['floor'], rate, SECONDS)
  const used = (await cpu()) - c0
  if (r.errors || r.dropped)
    throw new Error(`paced calls at ${rate}/s: ${r.errors} failed, ${r.dropped} dropped`)
  return { cpu: used / (rate * SECONDS), p50: r.p50 * 1000, p99: r.p99 * 1000 }
}

function report(
  name: string,
  seq: { wall: number; cpu: number },
  par?: { wall: number; cpu: number },
) {
  const many = par ? `${(1e6 / par.wall).toFixed(0)} | ${par.cpu.toFixed(0)}` : '— | —'
  console.log(`| ${name} | ${seq.wall.toFixed(0)} | ${seq.cpu.toFixed(0)} | ${many} |`)
}

/**
 * The HTTP/2 server side, in its own process (so its CPU is its own). Calls to `/redis` answer
 * after one ioredis GET, as a read answers after its Redis call.
 */
function serve(): void {
  const answer = Buffer.alloc(4096, 1)
  answer[0] = 0
  answer.writeUInt32BE(answer.length - 5, 1)
  const redis = new Redis({ host: redisHost, port: Number(redisPort), lazyConnect: true })
  const server = http2.createServer()
  server.on('stream', (stream, headers) => {
    stream.on('data', () => {})
    stream.once('end', async () => {
      // A key nobody sets: the round trip is the point, not what it reads.
      if (headers[':path'] === '/redis') {
        try {
          await redis.get('openplane-read-floor')
        } catch (err) {
          console.error(`read-floor: Redis at ${REDIS_HOST} (OPENPLANE_TEST_REDIS_HOST):`, err)
          process.exit(1)
        }
      }
      stream.respond(
        { ':status': 200, 'content-type': 'application/grpc' },
        { waitForTrailers: true },
      )
      stream.once('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }))
      stream.end(answer)
    })
  })
  // The same answer over HTTP/1.1 (gRPC's trailers after a chunked body), kept-alive.
  const h1 = http.createServer((req, res) => {
    req.on('data', () => {})
    req.once('end', () => {
      res.writeHead(200, { 'content-type': 'application/grpc', trailer: 'grpc-status' })
      res.addTrailers({ 'grpc-status': '0' })
      res.end(answer)
    })
  })
  h1.keepAliveTimeout = 60_000
  void redis.connect()
  server.listen(0, '127.0.0.1', () =>
    h1.listen(0, '127.0.0.1', () =>
      process.send!([
        (server.address() as net.AddressInfo).port,
        (h1.address() as net.AddressInfo).port,
      ]),
    ),
  )
  process.on('message', () => {
    const u = process.cpuUsage()
    process.send!(u.user + u.system)
  })
}

async function main(): Promise<void> {
  console.log(`${CALLS} calls each; µs per call`)
  console.log(
    '| what | sequential wall | sequential cpu | 16 at a time: calls/s | 16 at a time: cpu |',
  )
  console.log('| --- | ---: | ---: | ---: | ---: |')

  const socket = net.connect(Number(redisPort), redisHost)
  await new Promise((r) => socket.once('connect', r))
  socket.setNoDelay(true)
  // One PING at a time: each answer is one "+PONG\r\n".
  const ping: Call = () =>
    new Promise((resolve) => {
      socket.once('data', resolve)
      socket.write('PING\r\n')
    })
  // (One at a time only: answers to calls in flight together would arrive as one read.)
  report('loopback TCP round trip (raw PING to Redis)', await measure(ping, 1, ownCpu))
  socket.destroy()

  const redis = new Redis({ host: redisHost, port: Number(redisPort), enableAutoPipelining: true })
  report(
    'ioredis PING',
    await measure(() => redis.ping(), 1, ownCpu),
    await measure(() => redis.ping(), 16, ownCpu),
  )
  redis.disconnect()

  const pool = new pg.Pool({ connectionString: PG_URL, max: 4 })
  const query = () => pool.query('select $1::int as x', [1])
  report('pg: select $1', await measure(query, 1, ownCpu), await measure(query, 16, ownCpu))
  await pool.end()

  const child = fork(import.meta.filename, ['serve'])
  const [port, h1Port] = await new Promise<number[]>((r) =>
    child.once('message', (m) => r(m as number[])),
  )
  const serverCpu = () =>
    new Promise<number>((r) => {
      child.once('message', (m) => r(Number(m)))
      child.send('cpu')
    })
  const session = http2.connect(`http://127.0.0.1:${port}`)
  const body = Buffer.alloc(65)
  body.writeUInt32BE(60, 1)
  const callTo =
    (path: string): Call =>
    () =>
      new Promise((resolve, reject) => {
        const s = session.request({
          ':method': 'POST',
          ':path': path,
          'content-type': 'application/grpc',
          te: 'trailers',
        })
        s.on('data', () => {})
        s.on('close', resolve)
        s.on('error', reject)
        s.end(body)
      })
  const call = callTo('/bsky.Service/GetTimeline')
  // One call at a time, then 16: the server's CPU per call.
  const served = async (name: string, c: Call) =>
    report(name, await measure(c, 1, serverCpu), await measure(c, 16, serverCpu))
  await served('node:http2 unary call, 4 KB answer (server process cpu)', call)
  const withRedis = callTo('/redis')
  await served('the same, answered after one ioredis GET (server process cpu)', withRedis)

  console.log(`\npaced calls, ${SECONDS} s a rate; server process cpu µs per call, wall µs`)
  console.log(
    '| calls/s | bare: cpu | bare: p50 / p99 | after a GET: cpu | after a GET: p50 / p99 |',
  )
  console.log('| ---: | ---: | ---: | ---: | ---: |')
  for (const rate of RATES) {
    const bare = await paced(call, rate, serverCpu)
    const got = await paced(withRedis, rate, serverCpu)
    const walls = (r: { p50: number; p99: number }) => `${r.p50.toFixed(0)} / ${r.p99.toFixed(0)}`
    console.log(
      `| ${rate} | ${bare.cpu.toFixed(0)} | ${walls(bare)} | ${got.cpu.toFixed(0)} | ${walls(got)} |`,
    )
  }
  session.close()

  const agent = new http.Agent({ keepAlive: true, maxSockets: 16 })
  const h1call: Call = () =>
    new Promise((resolve, reject) => {
      const req = http.request({
        host: '127.0.0.1',
        port: h1Port,
        method: 'POST',
        path: '/bsky.Service/GetTimeline',
        agent,
        headers: { 'content-type': 'application/grpc', te: 'trailers' },
      })
      req.on('response', (res) => {
        res.on('data', () => {})
        res.on('end', resolve)
      })
      req.on('error', reject)
      req.end(body)
    })
  await served('node:http HTTP/1.1 call, kept alive, 4 KB answer (server process cpu)', h1call)
  agent.destroy()
  child.kill()
}

if (process.argv[2] === 'serve') serve()
else await main()
