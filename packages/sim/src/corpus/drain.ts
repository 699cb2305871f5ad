// A consumer that only counts: reads subscribeRepos from a cursor as fast as a WebSocket client
// can, and reports messages and bytes per second. It measures a firehose server (a replay, a
// relay) without any indexing behind it.
import WebSocket from 'ws'

export interface DrainResult {
  messages: number
  bytes: number
  seconds: number
  /** Why it stopped: the count was reached, the time ran out, or the server closed. */
  stop: 'count' | 'time' | 'closed'
}

export function drainFirehose(
  url: string,
  opts: { cursor?: number; maxMessages?: number; maxSeconds?: number } = {},
): Promise<DrainResult> {
  const target = new URL('/xrpc/com.atproto.sync.subscribeRepos', url)
  if (opts.cursor !== undefined) target.searchParams.set('cursor', String(opts.cursor))
  const ws = new WebSocket(target, { maxPayload: 16 * 1024 * 1024, perMessageDeflate: false })
  let messages = 0
  let bytes = 0
  let start = 0
  return new Promise((resolve, reject) => {
    let timer: NodeJS.Timeout | undefined
    const finish = (stop: DrainResult['stop']) => {
      clearTimeout(timer)
      const seconds = start ? (performance.now() - start) / 1000 : 0
      ws.removeAllListeners()
      ws.on('error', () => undefined)
      ws.terminate()
      resolve({ messages, bytes, seconds, stop })
    }
    ws.on('open', () => {
      start = performance.now()
      if (opts.maxSeconds) timer = setTimeout(() => finish('time'), opts.maxSeconds * 1000)
    })
    ws.on('message', (data: Buffer) => {
      messages++
      bytes += data.length
      if (opts.maxMessages && messages >= opts.maxMessages) finish('count')
    })
    ws.on('close', () => finish('closed'))
    ws.on('error', (err: Error) => {
      clearTimeout(timer)
      reject(err)
    })
  })
}
