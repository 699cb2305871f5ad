// The consumers of `pnpm bench:stream`, in a process of their own: N WebSocket connections to
// /subscribe that count frames and bytes without parsing them (as a relay's downstream would).
// Forked with the stream URL and N; reports its counts when asked over IPC.
import net from 'node:net'

const [streamUrl, countArg] = process.argv.slice(2) as [string, string]
const n = Number(countArg)
const url = new URL(streamUrl)

interface Stats {
  frames: number
  bytes: number
  /** Milliseconds (performance.now of this process) of the first and last frame. */
  first: number
  last: number
  closed: boolean
}

const stats: Stats[] = []

/** Counts a connection's frames: reads each header, skips its payload. */
function connect(s: Stats): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(url.port), url.hostname)
    let handshake = ''
    let upgraded = false
    let skip = 0
    const header: number[] = []
    const frames = (chunk: Buffer, from: number) => {
      let i = from
      while (i < chunk.length) {
        if (skip > 0) {
          const k = Math.min(skip, chunk.length - i)
          skip -= k
          i += k
          continue
        }
        header.push(chunk[i++]!)
        if (header.length < 2) continue
        const len7 = header[1]! & 0x7f
        const size = len7 < 126 ? 2 : len7 === 126 ? 4 : 10
        if (header.length < size) continue
        const length =
          len7 < 126
            ? len7
            : len7 === 126
              ? (header[2]! << 8) | header[3]!
              : (header[6]! * 2 ** 24 + (header[7]! << 16)) | (header[8]! << 8) | header[9]!
        header.length = 0
        skip = length
        s.frames++
        const now = performance.now()
        if (!s.first) s.first = now
        s.last = now
      }
    }
    socket.on('data', (chunk: Buffer) => {
      s.bytes += chunk.length
      if (upgraded) return frames(chunk, 0)
      handshake += chunk.toString('latin1')
      const end = handshake.indexOf('\r\n\r\n')
      if (end < 0) return
      if (!handshake.startsWith('HTTP/1.1 101')) {
        reject(new Error(`refused: ${handshake.split('\r\n')[0]}`))
        return
      }
      upgraded = true
      const rest = Buffer.byteLength(handshake.slice(end + 4), 'latin1')
      s.bytes = rest
      resolve()
      frames(chunk, chunk.length - rest)
    })
    socket.on('error', reject)
    socket.on('close', () => (s.closed = true))
    socket.write(
      `GET ${url.pathname}${url.search} HTTP/1.1\r\nHost: ${url.host}\r\nUpgrade: websocket\r\n` +
        'Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n' +
        'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
    )
  })
}

for (let i = 0; i < n; i++) stats.push({ frames: 0, bytes: 0, first: 0, last: 0, closed: false })
// Connections opened a hundred at a time: a burst of a thousand handshakes overflows the
// listen backlog.
for (let i = 0; i < n; i += 100) await Promise.all(stats.slice(i, i + 100).map(connect))
process.send!({ type: 'ready', now: performance.now() })
process.on('message', (m: { type: string }) => {
  if (m.type === 'report') process.send!({ type: 'report', now: performance.now(), stats })
  if (m.type === 'exit') process.exit(0)
})
