// The `/subscribe` endpoint on a port of its own (a feed generator is not the AppView, and the
// rpc port's limits are the AppView's): Jetstream's query parameters and wire format over
// WebSocket, each consumer reading at its own pace (consumer.ts) from what every serving process
// holds of the log (tail.ts). A consumer that reads nothing for the stall limit is closed with the
// reason, as is one left behind the retained window; a start cursor older than the log begins at
// its oldest message, one in the future (or none) at the live tip.
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Duplex } from 'node:stream'
import type { Kysely } from 'kysely'
import type { DatabaseSchema } from '@openplane/db'
import { childLogger, counter, gauge } from '@openplane/telemetry'
import { Consumer } from './consumer.ts'
import { FilterError, filterFromQuery } from './filter.ts'
import { ReplayPages } from './replay-pages.ts'
import { PublishedTail } from './tail.ts'
import { CLOSE, handshakeReply, validKey } from './websocket.ts'

const log = childLogger('subscribe')
const consumersGauge = gauge('openplane_subscribe_consumers', 'Consumers connected to /subscribe')
const messagesSent = counter('openplane_subscribe_messages_total', 'Messages sent to consumers')
const bytesSent = counter('openplane_subscribe_bytes_total', 'Bytes sent to consumers')
const closedTotal = counter(
  'openplane_subscribe_closed_total',
  'Consumer connections closed, by reason (stalled, behind_window, consumer, invalid, error)',
  ['reason'],
)
const refusedTotal = counter(
  'openplane_subscribe_refused_total',
  'Subscriptions refused before they began, by reason (bad_request, full)',
  ['reason'],
)

export interface SubscribeOptions {
  host: string
  port: number
  /** Memory each serving process gives the newest messages. */
  memoryBytes: number
  /** A consumer that reads nothing this long while messages wait is closed. */
  stallMs: number
  /** Consumers at most; more are refused (503). */
  maxConsumers: number
  /** Between two reads of the log that found nothing new. */
  pollMs: number
}

export interface SubscribeServer {
  url: string
  consumers(): number
  close(): Promise<void>
}

export async function startSubscribe(
  db: Kysely<DatabaseSchema>,
  opts: SubscribeOptions,
): Promise<SubscribeServer> {
  const tail = new PublishedTail(db, {
    memoryBytes: opts.memoryBytes / 2,
    pollMs: opts.pollMs,
    page: 5000,
  })
  // Half of the memory for the newest messages, half for pages of older ones being replayed.
  const pages = new ReplayPages(db, { pageSize: 1000, maxBytes: opts.memoryBytes / 2 })
  const consumers = new Set<Consumer>()
  /** Subscriptions between their request and their consumer: the tail must not rest meanwhile. */
  let opening = 0
  const host = {
    tail,
    pages,
    sent(messages: number, bytes: number) {
      messagesSent.inc(messages)
      bytesSent.inc(bytes)
    },
    closed(c: Consumer, reason: string) {
      if (!consumers.delete(c)) return
      consumersGauge.set(consumers.size)
      // The last one gone: the tail rests until the next comes.
      if (!consumers.size && !opening) tail.stop()
      closedTotal.inc({ reason: reasonLabel(reason) })
      log.debug({ reason }, 'consumer closed')
    },
  }
  tail.onAppend(() => {
    for (const c of consumers) c.pump()
  })
  const stallCheck = setInterval(() => {
    const now = Date.now()
    for (const c of consumers) {
      const ms = c.stalledFor(now)
      if (ms > opts.stallMs) {
        const seconds = Math.round(ms / 1000)
        c.close(CLOSE.policy, `consumer too slow: read nothing for ${seconds} s`)
      }
    }
  }, 1000)
  stallCheck.unref()

  const server = http.createServer((req, res) => {
    res.writeHead(req.url?.startsWith('/subscribe') ? 426 : 404, { 'content-type': 'text/plain' })
    res.end(req.url?.startsWith('/subscribe') ? 'a WebSocket upgrade is required\n' : 'not found\n')
  })
  server.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
    upgrade(req, socket, head).catch((err: unknown) => {
      log.warn({ err }, 'subscription not started')
      socket.destroy()
    })
  })
  async function upgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    const refuse = (status: number, reason: string, message: string) => {
      refusedTotal.inc({ reason })
      socket.end(
        `HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\nContent-Type: text/plain\r\n` +
          `Connection: close\r\nContent-Length: ${Buffer.byteLength(message) + 1}\r\n\r\n` +
          `${message}\n`,
      )
    }
    const url = new URL(req.url ?? '/', 'http://localhost')
    if (url.pathname !== '/subscribe') return refuse(404, 'bad_request', 'not found')
    const key = req.headers['sec-websocket-key']
    if (
      req.headers.upgrade?.toLowerCase() !== 'websocket' ||
      req.headers['sec-websocket-version'] !== '13' ||
      !validKey(key)
    ) {
      return refuse(400, 'bad_request', 'not a WebSocket version 13 handshake')
    }
    let filter
    try {
      filter = filterFromQuery(url.searchParams)
    } catch (err) {
      if (err instanceof FilterError) return refuse(400, 'bad_request', err.message)
      throw err
    }
    const cursor = url.searchParams.get('cursor')
    if (cursor && !/^\d+$/.test(cursor)) {
      return refuse(400, 'bad_request', `invalid cursor: ${cursor}`)
    }
    if (consumers.size >= opts.maxConsumers) return refuse(503, 'full', 'too many consumers')
    // The first consumer wakes the tail, which reads where the log ends.
    opening++
    try {
      await tail.start()
    } finally {
      opening--
    }
    if (socket.destroyed) {
      if (!consumers.size && !opening) tail.stop()
      return
    }
    const compress =
      url.searchParams.get('compress') === 'true' ||
      String(req.headers['socket-encoding']).toLowerCase() === 'zstd'
    // A cursor is inclusive (the message at it is sent again); absent or in the future: live.
    const at = cursor ? Number(cursor) : undefined
    const pos = at === undefined || at > Date.now() * 1000 ? tail.head : Math.max(0, at - 1)
    socket.write(handshakeReply(key))
    if ('setNoDelay' in socket && typeof socket.setNoDelay === 'function') socket.setNoDelay(true)
    const consumer = new Consumer(socket, host, {
      filter,
      compress,
      pos,
      requireHello: url.searchParams.get('requireHello') === 'true',
    })
    consumers.add(consumer)
    consumersGauge.set(consumers.size)
    log.debug({ pos, head: tail.head, compress }, 'consumer connected')
    if (head.length) socket.unshift(head)
    consumer.pump()
  }
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(opts.port, opts.host, () => resolve())
  })
  const address = server.address() as AddressInfo
  const url = `ws://${opts.host.includes(':') ? `[${opts.host}]` : opts.host}:${address.port}`
  log.info({ url: `${url}/subscribe` }, 'serving /subscribe')
  return {
    url,
    consumers: () => consumers.size,
    async close() {
      clearInterval(stallCheck)
      tail.stop()
      for (const c of [...consumers]) c.close(CLOSE.goingAway, 'server shutting down')
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}

function reasonLabel(reason: string): string {
  if (reason.includes('read nothing')) return 'stalled'
  if (reason.includes('retained window')) return 'behind_window'
  if (reason.includes('options_update') || reason.includes('frame')) return 'invalid'
  if (reason.includes('consumer') || reason.includes('socket')) return 'consumer'
  return 'error'
}
