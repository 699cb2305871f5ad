// The blocks of one repo's CAR while it is read. A CAR lists blocks in whatever order the PDS
// keeps them (not tree order), so the tree can be walked only once every block is in; small
// repos stay in memory, and past `memoryBytes` the rest goes to a temporary file with only an
// index (CID → offset) in memory. However large a repo is, memory stays bounded.
import { mkdtemp, open, rm, type FileHandle } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Cid } from '@atproto/lex-data'
import { BlockMap, ReadableBlockstore } from '@atproto/repo'

export class SpillStore extends ReadableBlockstore {
  private readonly memoryBytes: number
  private readonly memory = new Map<string, Uint8Array>()
  private held = 0
  private readonly onDisk = new Map<string, { offset: number; length: number }>()
  private file: { dir: string; handle: FileHandle; size: number } | undefined
  /** Total bytes of blocks put. */
  bytes = 0

  constructor(memoryBytes: number) {
    super()
    this.memoryBytes = memoryBytes
  }

  /** Whether blocks went to disk. */
  get spilled(): boolean {
    return this.file !== undefined
  }

  async put(cid: Cid, bytes: Uint8Array): Promise<void> {
    const key = cid.toString()
    if (this.memory.has(key) || this.onDisk.has(key)) return
    this.bytes += bytes.length
    if (this.held + bytes.length <= this.memoryBytes) {
      this.memory.set(key, bytes)
      this.held += bytes.length
      return
    }
    if (!this.file) {
      const dir = await mkdtemp(join(tmpdir(), 'openplane-repo-'))
      this.file = { dir, handle: await open(join(dir, 'blocks'), 'w+'), size: 0 }
    }
    const f = this.file
    await f.handle.write(bytes, 0, bytes.length, f.size)
    this.onDisk.set(key, { offset: f.size, length: bytes.length })
    f.size += bytes.length
  }

  async getBytes(cid: Cid): Promise<Uint8Array | null> {
    const key = cid.toString()
    const mem = this.memory.get(key)
    if (mem) return mem
    const at = this.onDisk.get(key)
    if (!at || !this.file) return null
    const buf = new Uint8Array(at.length)
    await this.file.handle.read(buf, 0, at.length, at.offset)
    return buf
  }

  async has(cid: Cid): Promise<boolean> {
    const key = cid.toString()
    return this.memory.has(key) || this.onDisk.has(key)
  }

  async getBlocks(cids: Cid[]): Promise<{ blocks: BlockMap; missing: Cid[] }> {
    const blocks = new BlockMap()
    const missing: Cid[] = []
    for (const cid of cids) {
      const bytes = await this.getBytes(cid)
      if (bytes) blocks.set(cid, bytes)
      else missing.push(cid)
    }
    return { blocks, missing }
  }

  /** Frees memory and removes the temporary file. */
  async close(): Promise<void> {
    this.memory.clear()
    this.onDisk.clear()
    if (!this.file) return
    const { dir, handle } = this.file
    this.file = undefined
    await handle.close().catch(() => {})
    await rm(dir, { recursive: true, force: true })
  }
}
