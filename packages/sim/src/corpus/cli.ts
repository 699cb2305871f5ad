// The corpus commands of `pnpm sim`: record a generated firehose to a file, serve a file as
// subscribeRepos, and drain a firehose to measure it.
import { readFile } from 'node:fs/promises'
import { parseArgs } from 'node:util'
import { formatCount, progressReporter } from '../progress.ts'
import { ParamError, parseJson } from '../validate.ts'
import { drainFirehose } from './drain.ts'
import { CorpusReader } from './file.ts'
import { parseFirehoseParams } from './params.ts'
import { recordFirehose } from './record.ts'
import { ReplayServer } from './replay.ts'
import { CorpusRepos } from './repos.ts'

export const CORPUS_USAGE = `  record-firehose <params.json> --out <file> [--events <n>] [--repos <n>] [--seed <n>]
                  [--signers <n>]
      generate the network's activity (params: packages/sim/examples/firehose-network.json),
      sign and frame every event once and write the frames to <file> as they go on the wire;
      the flags override the file's fields; --signers: signing threads (default 2)
  serve-firehose <file> [--port <n>] [--host <h>] [--rate <events/s>] [--head-start <n>]
                 [--serve-repos [--keep-cars]]
      serve the recorded frames as com.atproto.sync.subscribeRepos (with cursors, to any number
      of consumers), plus the users' PLC documents, handles and repo status on the same port;
      without --rate each consumer reads as fast as it can; with it the head advances in real
      time, --head-start frames ahead of the start; a consumer without a cursor starts at the
      head, as on a relay (pass cursor 0 to read from the start); GET /_replay shows the head,
      POST /_replay/drop cuts every consumer's connection (a relay fault; they reconnect);
      --serve-repos: also each user's whole repo (listRepos, getRepo) as of the corpus's end,
      once read from the corpus (/_replay says when); --keep-cars: each repo's CAR is built
      and signed once, then served from memory; the same stream is also served as
      Jetstream does at /subscribe (cursor in time_us, wantedCollections, compress=true)
  drain-firehose <ws-url> [--cursor <n>] [--max <n>] [--seconds <n>]
      read a firehose as fast as possible and print messages/s (measures the server)`

export const CORPUS_COMMANDS = new Set(['record-firehose', 'serve-firehose', 'drain-firehose'])

export async function corpusCommand(cmd: string, argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      out: { type: 'string' },
      events: { type: 'string' },
      repos: { type: 'string' },
      seed: { type: 'string' },
      signers: { type: 'string' },
      port: { type: 'string' },
      host: { type: 'string' },
      rate: { type: 'string' },
      'head-start': { type: 'string' },
      'serve-repos': { type: 'boolean' },
      'keep-cars': { type: 'boolean' },
      cursor: { type: 'string' },
      max: { type: 'string' },
      seconds: { type: 'string' },
    },
  })
  const first = positionals[0]
  if (!first) throw new ParamError(`${cmd} needs ${cmd === 'drain-firehose' ? 'a URL' : 'a file'}`)
  const int = (name: keyof typeof values, min = 0): number | undefined => {
    const raw = values[name]
    if (raw === undefined) return undefined
    const n = Number(raw)
    if (typeof raw !== 'string' || !Number.isSafeInteger(n) || n < min) {
      throw new ParamError(`--${name} must be an integer ≥ ${min}, got ${JSON.stringify(raw)}`)
    }
    return n
  }

  if (cmd === 'record-firehose') {
    if (!values.out) throw new ParamError('record-firehose needs --out <file>')
    const raw = parseJson(await readFile(first, 'utf8'), first) as Record<string, unknown>
    for (const key of ['events', 'repos', 'seed'] as const) {
      const v = int(key, key === 'seed' ? 0 : 1)
      if (v !== undefined) raw[key] = v
    }
    const params = parseFirehoseParams(raw, first)
    const progress = progressReporter()
    const started = performance.now()
    const summary = await recordFirehose(params, values.out, {
      signers: int('signers'),
      onProgress: (done, total) => progress('record', done, total),
      progressEvery: 1000,
    })
    progress('record', summary.frames, summary.frames)
    progress.finish()
    const secs = (performance.now() - started) / 1000
    console.log(
      `wrote ${values.out}: ${summary.frames} events over ${params.repos} repos, ` +
        `${formatCount(summary.bytes)}B, ${(summary.frames / secs).toFixed(0)} events/s, ` +
        `sha256 ${summary.sha256}`,
    )
    console.log(
      Object.entries(summary.counts)
        .map(([k, v]) => `${k} ${v}`)
        .join(', '),
    )
    return 0
  }

  if (cmd === 'serve-firehose') {
    const corpus = await CorpusReader.open(first)
    const rate = values.rate === undefined ? undefined : Number(values.rate)
    if (rate !== undefined && !(rate > 0)) throw new ParamError('--rate must be a positive number')
    const server = await ReplayServer.start({
      corpus,
      host: values.host ?? '127.0.0.1',
      port: int('port') ?? 0,
      rate,
      headStart: int('head-start'),
    })
    // One machine-readable line first: scripts start this command and read where it listens.
    const { public_keys: _keys, ...summary } = corpus.summary
    console.log(JSON.stringify({ url: server.url, httpUrl: server.httpUrl, ...summary }))
    console.error(
      `serving ${corpus.summary.frames} events (seq ${corpus.summary.first_seq}…` +
        `${corpus.summary.last_seq}) on ${server.url}` +
        (rate ? ` at ${rate} events/s` : ' as fast as each consumer reads'),
    )
    if (values['serve-repos']) {
      const t0 = performance.now()
      const repos = await CorpusRepos.load(
        corpus,
        (n) => console.error(`  repos: ${n} frames read`),
        { keepCars: values['keep-cars'] === true },
      )
      server.serveRepos(repos)
      console.error(
        `serving ${repos.ids().length} repos (${repos.records()} records), read in ` +
          `${((performance.now() - t0) / 1000).toFixed(0)} s`,
      )
    }
    await new Promise<void>((resolve) => {
      process.once('SIGINT', resolve)
      process.once('SIGTERM', resolve)
    })
    await server.close()
    await corpus.close()
    return 0
  }

  const res = await drainFirehose(first, {
    cursor: int('cursor'),
    maxMessages: int('max', 1),
    maxSeconds: int('seconds', 1),
  })
  console.log(
    `drained ${res.messages} messages (${formatCount(res.bytes)}B) in ${res.seconds.toFixed(2)} s: ` +
      `${(res.messages / res.seconds).toFixed(0)} messages/s (stopped: ${res.stop})`,
  )
  return 0
}
