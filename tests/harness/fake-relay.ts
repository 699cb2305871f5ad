// A subscribeRepos endpoint replaying a fixed list of frames (after the requested cursor), for
// feeding recorded or crafted firehose data to an indexer.
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { WebSocketServer } from 'ws'

export interface CorpusFrame {
  /** Position in the stream; a frame is sent when it is after the client's cursor. */
  seq: number
  bytes: Uint8Array
}

export interface FakeRelay {
  url: string
  connections: number
  close(): Promise<void>
}

export async function startFakeRelay(frames: CorpusFrame[]): Promise<FakeRelay> {
  const server = http.createServer((_, res) => res.writeHead(404).end())
  const wss = new WebSocketServer({ server, path: '/xrpc/com.atproto.sync.subscribeRepos' })
  const relay = { url: '', connections: 0, close: async () => {} }
  wss.on('connection', (ws, req) => {
    relay.connections++
    const cursor = Number(new URL(req.url ?? '/', 'http://x').searchParams.get('cursor') ?? -1)
    for (const f of frames) if (f.seq > cursor) ws.send(f.bytes)
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()))
  relay.url = `ws://127.0.0.1:${(server.address() as AddressInfo).port}`
  relay.close = () =>
    new Promise<void>((r) => {
      for (const c of wss.clients) c.terminate()
      wss.close()
      server.close(() => r())
    })
  return relay
}

/** Corpus files are JSON lines: {"seq": n, "note": "...", "frame": "<base64>"}. */
export function parseCorpus(text: string): (CorpusFrame & { note: string })[] {
  return text
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => {
      const j = JSON.parse(l) as { seq: number; note: string; frame: string }
      return { seq: j.seq, note: j.note, bytes: new Uint8Array(Buffer.from(j.frame, 'base64')) }
    })
}
