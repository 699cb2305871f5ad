// Records a PDS firehose from the start up to a given seq, as frames a fake relay can replay.
import WebSocket from 'ws'
import { decodeAll } from '@atproto/lex-cbor'
import type { CorpusFrame } from '../harness/fake-relay.ts'

export function recordFirehose(pdsUrl: string, headSeq: number): Promise<CorpusFrame[]> {
  const url = `${pdsUrl.replace(/^http/, 'ws')}/xrpc/com.atproto.sync.subscribeRepos?cursor=0`
  return new Promise((resolve, reject) => {
    const frames: CorpusFrame[] = []
    const ws = new WebSocket(url)
    ws.on('message', (data: Buffer) => {
      const bytes = new Uint8Array(data)
      const [, body] = [...decodeAll(bytes)] as [unknown, { seq?: number }]
      const seq = body?.seq ?? frames.at(-1)?.seq ?? 0
      frames.push({ seq, bytes })
      if (seq >= headSeq) {
        ws.close()
        resolve(frames)
      }
    })
    ws.on('error', reject)
  })
}
