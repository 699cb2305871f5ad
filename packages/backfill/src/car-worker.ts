// A CAR worker: repo CARs in, their commits and checked records out (repo-decode.ts), one at a
// time (the reference reader awaits; interleaved repos would blur each one's CPU time).
import { parentPort } from 'node:worker_threads'
import { READY, threadCpuSeconds } from '@openplane/ingest'
import type { CarReply, CarRequest } from './car-reader.ts'
import { RepoCarError } from './car.ts'
import { decodeRepo } from './repo-decode.ts'

let queue = Promise.resolve()
parentPort!.on('message', (req: CarRequest) => {
  queue = queue.then(() => handle(req))
})

async function handle(req: CarRequest): Promise<void> {
  const cpuBefore = threadCpuSeconds()
  let reply: Omit<CarReply, 'id' | 'cpuSeconds'>
  try {
    reply = { repo: await decodeRepo(req.bytes, req) }
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err)
    reply = { error: { message, car: err instanceof RepoCarError } }
  }
  parentPort!.postMessage({ ...reply, id: req.id, cpuSeconds: threadCpuSeconds() - cpuBefore })
}

parentPort!.postMessage(READY)
