// A labeler for tests: a DID on a test PLC whose document names this server as its
// #atproto_labeler and a key as its #atproto_label, and a subscribeLabels endpoint sending the
// labels it is given (after the client's cursor, then live). Labels are signed with whichever key
// the test says, so bad signatures and key rotations can be played.
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { Secp256k1Keypair } from '@atproto/crypto'
import { encode } from '@atproto/lex-cbor'
import * as plc from '@did-plc/lib'
import { WebSocketServer, type WebSocket } from 'ws'

export interface LabelInput {
  uri: string
  val: string
  neg?: boolean
  cts?: string
  exp?: string
  cid?: string
}

export interface FakeLabeler {
  did: string
  url: string
  /** The key the DID document names now. */
  key: Secp256k1Keypair
  /** Signs and sends one frame of labels (signed with `signer`, default the current key); its seq. */
  emit(labels: LabelInput[], signer?: Secp256k1Keypair): Promise<number>
  /** Names a new #atproto_label key in the DID document; returns it. */
  rotate(): Promise<Secp256k1Keypair>
  close(): Promise<void>
}

export async function startFakeLabeler(plcUrl: string): Promise<FakeLabeler> {
  const server = http.createServer((_, res) => res.writeHead(404).end())
  const wss = new WebSocketServer({ server, path: '/xrpc/com.atproto.label.subscribeLabels' })
  const frames: { seq: number; bytes: Uint8Array }[] = []
  const live = new Set<WebSocket>()
  wss.on('connection', (ws, req) => {
    const cursor = Number(new URL(req.url ?? '/', 'http://x').searchParams.get('cursor') ?? 0)
    for (const f of frames) if (f.seq > cursor) ws.send(f.bytes)
    live.add(ws)
    ws.on('close', () => live.delete(ws))
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`

  const rotation = await Secp256k1Keypair.create()
  let key = await Secp256k1Keypair.create()
  const genesis = await plc.signOperation(
    {
      type: 'plc_operation',
      alsoKnownAs: [],
      rotationKeys: [rotation.did()],
      verificationMethods: { atproto_label: key.did() },
      services: { atproto_labeler: { type: 'AtprotoLabeler', endpoint: url } },
      prev: null,
    },
    rotation,
  )
  const client = new plc.Client(plcUrl)
  const did = await plc.didForCreateOp(genesis)
  await client.sendOperation(did, genesis)

  const labeler: FakeLabeler = {
    did,
    url,
    key,
    async emit(labels, signer = key) {
      const seq = frames.length + 1
      const signed = []
      for (const l of labels) {
        const unsigned: Record<string, unknown> = {
          ver: 1,
          src: did,
          uri: l.uri,
          val: l.val,
          cts: l.cts ?? new Date().toISOString(),
        }
        if (l.cid) unsigned.cid = l.cid
        if (l.neg) unsigned.neg = true
        if (l.exp) unsigned.exp = l.exp
        signed.push({ ...unsigned, sig: await signer.sign(encode(unsigned as never)) })
      }
      const header = encode({ op: 1, t: '#labels' } as never)
      const body = encode({ seq, labels: signed } as never)
      const bytes = new Uint8Array(header.length + body.length)
      bytes.set(header)
      bytes.set(body, header.length)
      frames.push({ seq, bytes })
      for (const ws of live) ws.send(bytes)
      return seq
    },
    async rotate() {
      key = await Secp256k1Keypair.create()
      const next = key.did()
      await client.updateData(did, rotation, (last) => ({
        ...last,
        verificationMethods: { ...last.verificationMethods, atproto_label: next },
      }))
      labeler.key = key
      return key
    },
    close: () =>
      new Promise<void>((r) => {
        for (const c of wss.clients) c.terminate()
        wss.close()
        server.close(() => r())
      }),
  }
  return labeler
}
