// The floor of `pnpm bench:stream`, in a process of its own: the least a server can do to move the
// stream's bytes to N consumers on this machine. It accepts WebSocket connections (the handshake
// only, no parsing beyond it) and writes the same pre-built frames to every one, cycling through
// them, paced to a total of bytes per second and held back while a socket's buffer is full. No
// log, no filter, no compression: what is left is the kernel's sending and this loop. Forked with
// the frames' file, the port and the total bytes/s; says `ready` once listening.
import { readFileSync } from 'node:fs'
import net from 'node:net'
import { handshakeReply } from '@openplane/subscribe'

const [framesFile, portArg, rateArg] = process.argv.slice(2) as [string, string, string]
const frames = readFileSync(framesFile)
const port = Number(portArg)
/** Total bytes per second over every connection. */
const rate = Number(rateArg)
const TICK_MS = 10
/** Unsent bytes past which a connection is not written to (as /subscribe's consumers). */
const HIGH_WATER = 256 * 1024
/** Bytes per write, about (as /subscribe's). */
const CHUNK = 128 * 1024

interface Conn {
  socket: net.Socket
  /** Where in `frames` its next write starts. */
  at: number
  /** Bytes it may still be sent this tick and the ticks before. */
  budget: number
}

const conns: Conn[] = []

const server = net.createServer((socket) => {
  let head = ''
  const onData = (chunk: Buffer) => {
    head += chunk.toString('latin1')
    const end = head.indexOf('\r\n\r\n')
    if (end < 0) return
    socket.off('data', onData)
    const key = /sec-websocket-key:\s*(\S+)/i.exec(head.slice(0, end))?.[1] ?? ''
    socket.write(handshakeReply(key))
    conns.push({ socket, at: 0, budget: 0 })
  }
  socket.on('data', onData)
  socket.on('error', () => socket.destroy())
})
server.listen(port, '127.0.0.1', () => process.send!({ type: 'ready' }))

let last = performance.now()
setInterval(() => {
  const now = performance.now()
  const each = conns.length ? (rate * (now - last)) / 1000 / conns.length : 0
  last = now
  for (const c of conns) {
    if (c.socket.destroyed) continue
    // Unused budget is kept for one chunk at most: a consumer that was full does not get a burst.
    c.budget = Math.min(c.budget + each, each + CHUNK)
    while (c.budget >= 1 && c.socket.writableLength < HIGH_WATER) {
      const n = Math.min(CHUNK, Math.floor(c.budget), frames.length - c.at)
      c.socket.write(frames.subarray(c.at, c.at + n))
      c.budget -= n
      c.at = (c.at + n) % frames.length
    }
  }
}, TICK_MS)

process.on('message', (m: { type: string }) => {
  if (m.type === 'exit') process.exit(0)
})
