// A TCP proxy in front of Postgres that can lose a COMMIT's reply: armed, it relays the next
// COMMIT, waits until the server has answered it (so the transaction really committed), then
// cuts both sockets without passing the answer on. The client sees its connection die mid-commit
// and cannot tell whether the transaction went through (an "ambiguous commit"). It can also cut
// before a COMMIT reaches the server, and play an unreachable server (down/up).
//
// It reads just enough of the wire protocol to find message boundaries: the untyped startup
// packets (an SSLRequest or GSSENCRequest is answered 'N' here, so the client goes on in plain
// text), then typed messages (1-byte type, int32 length counting itself). Every other byte is
// relayed untouched.
import net from 'node:net'

const SSL_REQUEST = 80877103
const GSSENC_REQUEST = 80877104
/** COMMIT and its spellings (END is an alias), with optional whitespace and semicolon. */
const COMMIT = /^\s*(commit|end)(\s+(work|transaction))?\s*;?\s*$/i

export interface PgCutProxy {
  port: number
  /** `target` with the proxy's host and port in place of Postgres's. */
  url: string
  /**
   * The next COMMIT (on whichever connection sends it) reaches the server; once the server's
   * reply to it is complete, both sockets are destroyed and the reply is never relayed. Resolves
   * when the cut happened.
   */
  cutAfterNextCommit(): Promise<void>
  /** The next COMMIT never reaches the server: both sockets are destroyed instead (rollback). */
  cutBeforeNextCommit(): Promise<void>
  /** Destroys every open connection and refuses new ones (accepted, then closed) until up(). */
  down(): void
  up(): void
  /** Connections refused while down. */
  readonly refused: number
  close(): Promise<void>
}

interface Armed {
  after: boolean
  fired: () => void
}

/** Splits a byte stream into whole messages; `typed` is false while startup packets may come. */
class Framer {
  private buf: Buffer = Buffer.alloc(0)
  typed: boolean
  constructor(typed: boolean) {
    this.typed = typed
  }

  push(chunk: Buffer): void {
    this.buf = this.buf.length ? Buffer.concat([this.buf, chunk]) : chunk
  }

  /** The next whole message, or undefined until more bytes arrive. */
  next(): Buffer | undefined {
    const head = this.typed ? 1 : 0
    if (this.buf.length < head + 4) return undefined
    const size = head + this.buf.readInt32BE(head)
    if (this.buf.length < size) return undefined
    const msg = this.buf.subarray(0, size)
    this.buf = this.buf.subarray(size)
    return msg
  }
}

/** The SQL text of a simple Query ('Q') or a Parse ('P'), else undefined. */
function sqlOf(msg: Buffer): string | undefined {
  const type = String.fromCharCode(msg[0]!)
  if (type === 'Q') return msg.toString('utf8', 5, msg.length - 1)
  if (type !== 'P') return undefined
  // Parse: statement name (C string), then the query (C string), then parameter types.
  const nameEnd = msg.indexOf(0, 5)
  return msg.toString('utf8', nameEnd + 1, msg.indexOf(0, nameEnd + 1))
}

export async function startPgCutProxy(target: string): Promise<PgCutProxy> {
  const upstream = new URL(target)
  const conns = new Set<net.Socket>()
  let armed: Armed | undefined
  let isDown = false
  let refused = 0

  const server = net.createServer((client) => {
    if (isDown) {
      refused++
      client.destroy()
      return
    }
    const pg = net.connect(Number(upstream.port || 5432), upstream.hostname)
    conns.add(client).add(pg)
    const cut = () => {
      client.destroy()
      pg.destroy()
    }
    for (const s of [client, pg]) {
      s.on('error', cut)
      s.on('close', () => {
        conns.delete(s)
        cut()
      })
    }

    // Every simple Query and every Sync is answered by exactly one ReadyForQuery ('Z'), as is
    // the startup. Counting both sides tells which 'Z' ends the reply to a given message.
    let syncs = 1
    let readies = 0
    /** The ReadyForQuery that ends the armed COMMIT's reply; from the one before, hold back. */
    let cutAt: { ready: number; fired: () => void } | undefined

    const fromClient = new Framer(false)
    client.on('data', (chunk: Buffer) => {
      const relay: Buffer[] = []
      fromClient.push(chunk)
      for (let msg = fromClient.next(); msg; msg = fromClient.next()) {
        if (!fromClient.typed) {
          const code = msg.readInt32BE(4)
          if (code === SSL_REQUEST || code === GSSENC_REQUEST) {
            client.write('N')
            continue
          }
          // The StartupMessage (or a CancelRequest, after which the server just closes).
          fromClient.typed = true
          relay.push(msg)
          continue
        }
        const type = String.fromCharCode(msg[0]!)
        const text = sqlOf(msg)
        if (armed && text !== undefined && COMMIT.test(text)) {
          const { after, fired } = armed
          armed = undefined
          if (!after) {
            if (relay.length) pg.write(Buffer.concat(relay))
            cut()
            fired()
            return
          }
          // The reply ends at the next 'Z': this Query's own, or the Sync's after this Parse.
          cutAt = { ready: syncs + 1, fired }
        }
        if (type === 'Q' || type === 'S') syncs++
        relay.push(msg)
      }
      if (relay.length) pg.write(Buffer.concat(relay))
    })

    const fromServer = new Framer(true)
    pg.on('data', (chunk: Buffer) => {
      const relay: Buffer[] = []
      fromServer.push(chunk)
      for (let msg = fromServer.next(); msg; msg = fromServer.next()) {
        // Replies to messages sent before the COMMIT still go through.
        if (!cutAt || readies < cutAt.ready - 1) relay.push(msg)
        if (msg[0] === 0x5a /* 'Z' */) readies++
        if (cutAt && readies === cutAt.ready) {
          if (relay.length) client.write(Buffer.concat(relay))
          cut()
          cutAt.fired()
          return
        }
      }
      if (relay.length) client.write(Buffer.concat(relay))
    })
  })

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as net.AddressInfo).port
  const url = new URL(target)
  url.hostname = '127.0.0.1'
  url.port = String(port)

  const arm = (after: boolean) =>
    new Promise<void>((fired) => {
      if (armed) throw new Error('a cut is already armed')
      armed = { after, fired }
    })

  return {
    port,
    url: url.toString(),
    cutAfterNextCommit: () => arm(true),
    cutBeforeNextCommit: () => arm(false),
    down() {
      isDown = true
      for (const s of conns) s.destroy()
    },
    up() {
      isDown = false
    },
    get refused() {
      return refused
    },
    close() {
      for (const s of conns) s.destroy()
      return new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}
