// The contract test: our generated bsky.Service must equal the one @atproto/bsky ships, and the
// committed proto/codegen output must be what the scripts produce for the installed version.
import { execFileSync } from 'node:child_process'
import path from 'node:path'
import { describe, expect, it } from 'vitest'
import * as ours from '@openplane/proto'
import { Service as OurService } from '@openplane/proto'
import * as oursBsync from '@openplane/proto/bsync'
import { diffContracts } from '../../scripts/contract-diff.ts'
import { loadStockContract, stockPackageDir } from '../../scripts/stock-contract.ts'

const root = path.resolve(import.meta.dirname, '../..')

async function stock() {
  const dir = await stockPackageDir()
  const pb = (await import(path.join(dir, 'dist/proto/bsky_pb.js'))) as Record<string, unknown>
  const { service } = await loadStockContract()
  return { service, pb }
}

describe('bsky.Service contract', () => {
  it('matches the stock package method by method and field by field', async () => {
    const expected = await stock()
    const drift = diffContracts(expected, {
      service: OurService as never,
      pb: ours as unknown as Record<string, unknown>,
    })
    expect(drift).toEqual([])
    expect(Object.keys(OurService.methods).length).toBe(
      Object.keys(expected.service.methods).length,
    )
  })

  it('detects drift (a changed field type, a missing rpc)', async () => {
    const expected = await stock()
    const methods = { ...expected.service.methods }
    delete methods.ping
    const tampered = { ...expected.service, methods }
    const drift = diffContracts(expected, { service: tampered, pb: ours as never })
    expect(drift).toContain('rpc Ping: missing')
    const pb = { ...(ours as unknown as Record<string, unknown>) }
    const fields = (ours.GetTimelineRequest as unknown as { fields: { list(): object[] } }).fields
    const fake = {
      typeName: 'bsky.GetTimelineRequest',
      fields: { list: () => fields.list().map((f) => ({ ...f, repeated: true })) },
    }
    pb.GetTimelineRequest = Object.assign(function () {}, fake)
    const drift2 = diffContracts(expected, { service: OurService as never, pb })
    expect(drift2.some((l) => l.startsWith('bsky.GetTimelineRequest #1: repeated'))).toBe(true)
  })

  it('bsync.Service (which the bsync consumer calls) matches the stock package too', async () => {
    const dir = await stockPackageDir()
    const pb = (await import(path.join(dir, 'dist/proto/bsync_pb.js'))) as Record<string, unknown>
    const { service } = await loadStockContract('bsync')
    const drift = diffContracts(
      { service, pb },
      {
        service: oursBsync.BsyncService as never,
        pb: oursBsync as unknown as Record<string, unknown>,
      },
    )
    expect(drift).toEqual([])
    expect(Object.keys(oursBsync.BsyncService.methods)).toContain('scanOperations')
  })

  it('proto/*.proto and the generated code are current', () => {
    const run = (script: string) =>
      execFileSync(process.execPath, [path.join(root, 'scripts', script), '--check'], {
        cwd: root,
        encoding: 'utf8',
      })
    expect(run('proto-from-stock.ts')).toMatch(/matches/)
    expect(run('codegen.ts')).toMatch(/matches/)
  })
})
