// Bytes on the wire per event for the same events: the firehose (CBOR frames with their CAR
// blocks), Jetstream (JSON, one message per op), Jetstream asked only for the collections
// openplane indexes, and that with zstd and Jetstream's dictionary. Each stream is read whole
// from a replay server of the corpus, one at a time; the server counts what it wrote (WebSocket
// framing included).
import { indexedCollections } from '@openplane/plugins'
import WebSocket from 'ws'

interface Consumer {
  sent: number
  bytes: number
  kind: string
}

export interface WireRow {
  name: string
  bytes: number
  perEvent: number
}

export async function measureWire(
  httpUrl: string,
  frames: number,
  log: (...a: unknown[]) => void,
): Promise<WireRow[]> {
  const wanted = indexedCollections()
    .map((c) => `wantedCollections=${encodeURIComponent(c)}`)
    .join('&')
  const streams = [
    ['firehose', '/xrpc/com.atproto.sync.subscribeRepos?cursor=0'],
    ['jetstream, every collection', '/subscribe?cursor=1'],
    ['jetstream, indexed collections', `/subscribe?cursor=1&${wanted}`],
    ['jetstream+zstd, indexed collections', `/subscribe?cursor=1&compress=true&${wanted}`],
  ] as const
  const rows: WireRow[] = []
  for (const [name, path] of streams) {
    log(`wire: reading the ${name} stream…`)
    const ws = new WebSocket(httpUrl.replace(/^http/, 'ws') + path)
    ws.on('message', () => {})
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve())
      ws.once('error', reject)
    })
    let consumer: Consumer | undefined
    for (;;) {
      const status = (await (await fetch(`${httpUrl}/_replay`)).json()) as { consumers: Consumer[] }
      consumer = status.consumers[0]
      if (consumer && consumer.sent >= frames) break
      await new Promise((r) => setTimeout(r, 500))
    }
    ws.close()
    // The next stream starts once this consumer is gone, so /_replay lists one at a time.
    for (;;) {
      const status = (await (await fetch(`${httpUrl}/_replay`)).json()) as { consumers: Consumer[] }
      if (!status.consumers.length) break
      await new Promise((r) => setTimeout(r, 100))
    }
    rows.push({ name, bytes: consumer.bytes, perEvent: consumer.bytes / frames })
  }
  return rows
}

/** The table and the summary line. */
export function printWire(rows: WireRow[], frames: number): void {
  console.log(`\n| stream (${frames} events) | bytes | bytes/event | vs firehose |`)
  console.log('| --- | ---: | ---: | ---: |')
  const base = rows[0]!.perEvent
  for (const r of rows) {
    console.log(
      `| ${r.name} | ${r.bytes} | ${r.perEvent.toFixed(0)} | ${(r.perEvent / base).toFixed(3)} |`,
    )
  }
  const [fh, , js, zstd] = rows
  console.log(
    `wire: firehose ${fh!.perEvent.toFixed(0)} B/event, jetstream ${js!.perEvent.toFixed(0)} ` +
      `B/event (${(fh!.perEvent / js!.perEvent).toFixed(1)}x fewer), jetstream+zstd ` +
      `${zstd!.perEvent.toFixed(0)} B/event (${(fh!.perEvent / zstd!.perEvent).toFixed(1)}x fewer)`,
  )
}
