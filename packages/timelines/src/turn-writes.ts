// Commands sent during one turn of the event loop leave in one socket write. Without this, every
// command is its own write system call, and each such write on loopback TCP runs the kernel's
// network stack and wakes Redis: under load that was the largest single cost of a timeline read
// (the command write was 17 % of the server's busy time at 1,600 reads/s). The reads that one
// socket read of the rpc server brings in now share one write, and Redis reads them together.
//
// How: the first command of a turn corks the connection's socket, and an immediate (which runs
// once the turn's I/O callbacks, and the microtasks they start, are done) uncorks it, so the
// socket hands what it holds to the kernel as one writev. A command sent alone waits only for the
// rest of its own turn. ioredis' auto-pipelining would batch too, but it keeps every command's
// arguments and reply reachable from the pipelines after it (see redis-client.ts).
import type { Redis } from 'ioredis'

export class TurnWrites {
  readonly #client: Redis
  #held: Redis['stream'] | undefined

  constructor(client: Redis) {
    this.#client = client
  }

  /** Holds this turn's writes on the connection (call before sending a command). */
  hold(): void {
    if (this.#held) return
    const client = this.#client
    // Only a connection in use: while connecting, ioredis sends its handshake on its own.
    if (client.status !== 'ready') return
    const stream = client.stream
    if (!stream.writable) return
    stream.cork()
    this.#held = stream
    setImmediate(this.#release)
  }

  readonly #release = (): void => {
    const stream = this.#held
    this.#held = undefined
    // A socket closed meanwhile drops what it held; ioredis fails those commands on close.
    stream?.uncork()
  }
}
