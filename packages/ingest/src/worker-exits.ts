// Worker threads that keep dying (a broken install, no memory for them) must not be respawned in
// a hot loop: past a few exits in a short while, their work is done on the calling thread.
export class WorkerExits {
  private readonly max: number
  private readonly windowMs: number
  private times: number[] = []

  constructor(max = 5, windowMs = 10_000) {
    this.max = max
    this.windowMs = windowMs
  }

  /** Notes an exit; true when workers exited too often to be started again. */
  tooMany(): boolean {
    const now = Date.now()
    this.times = [...this.times.filter((t) => now - t < this.windowMs), now]
    return this.times.length > this.max
  }
}
