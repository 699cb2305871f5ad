// Backpressure for a consumer that has none. The stock indexer reads the firehose as fast as it
// arrives and queues every event in memory until its handlers get to it; replayed at full speed,
// a large corpus grows its heap by gigabytes and it slows to a crawl, which measures its memory
// management, not its indexing. This relay sits between the replay server and the stock and
// forwards frames only while fewer than `limit` are in flight (forwarded, not yet handled), so the
// stock runs at its best sustainable rate with all the parallelism that many events give it.
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import WebSocket, { WebSocketServer } from 'ws'

export interface PacingRelay {
  url: string
  forwarded(): number
  close(): Promise<void>
}

export async function startPacingRelay(
  upstream: string,
  limit: number,
  handled: () => number,
): Promise<PacingRelay> {
  const server = http.createServer((_, res) => res.writeHead(404).end())
  const wss = new WebSocketServer({ server, path: '/xrpc/com.atproto.sync.subscribeRepos' })
  let forwarded = 0
  const timers: NodeJS.Timeout[] = []
  wss.on('connection', (down, req) => {
    const cursor = new URL(req.url ?? '/', 'http://relay').searchParams.get('cursor')
    const url = new URL('/xrpc/com.atproto.sync.subscribeRepos', upstream)
    url.searchParams.set('cursor', cursor ?? '0')
    const up = new WebSocket(url, { maxPayload: 16 * 1024 * 1024 })
    up.on('message', (data: Buffer) => {
      forwarded++
      down.send(data)
      if (forwarded - handled() >= limit) up.pause()
    })
    const timer = setInterval(() => {
      if (up.isPaused && forwarded - handled() < limit / 2) up.resume()
    }, 5)
    timers.push(timer)
    const end = () => {
      clearInterval(timer)
      up.terminate()
      down.terminate()
    }
    up.on('close', end)
    up.on('error', end)
    down.on('close', end)
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()))
  return {
    url: `ws://127.0.0.1:${(server.address() as AddressInfo).port}`,
    forwarded: () => forwarded,
    close: () =>
      new Promise<void>((r) => {
        for (const t of timers) clearInterval(t)
        for (const c of wss.clients) c.terminate()
        wss.close()
        server.close(() => r())
        server.closeAllConnections()
      }),
  }
}
