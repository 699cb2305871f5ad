// A small firehose corpus recorded for one test file, in a temporary directory of its own.
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { CorpusReader, parseFirehoseParams, recordFirehose } from '@openplane/sim'

export interface TestCorpus {
  corpus: CorpusReader
  /** Closes the reader and removes the directory. */
  close(): Promise<void>
}

export async function recordTestCorpus(params: {
  name: string
  repos: number
  events: number
  seed: number
}): Promise<TestCorpus> {
  const dir = await mkdtemp(path.join(tmpdir(), `opfh-${params.name}-`))
  const file = path.join(dir, 'corpus.firehose')
  await recordFirehose(parseFirehoseParams(params), file)
  const corpus = await CorpusReader.open(file)
  return {
    corpus,
    async close() {
      await corpus.close()
      await rm(dir, { recursive: true, force: true })
    },
  }
}
