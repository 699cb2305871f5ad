// pnpm fuzz:indexer — random sequences against the stock indexer for a time budget; every
// difference is shrunk and printed as a regression test. Not part of CI (the bounded run is
// tests/indexer/fuzz.test.ts).
//   FUZZ_MINUTES (default 10), FUZZ_SEEDS (comma-separated: replay exactly these),
//   FUZZ_FIRST_SEED (default: from the clock), FUZZ_MIN_LENGTH / FUZZ_MAX_LENGTH (5 / 60 events)
// The stock's logs and ours stay quiet (skipped records are expected here); set before the
// loggers are loaded.
process.env.LOG_ENABLED ??= 'false'
process.env.LOG_LEVEL ??= 'silent'
const { runCampaign } = await import('../harness/fuzz/campaign.ts')
const { Fuzzer } = await import('../harness/fuzz/run.ts')

function intEnv(name: string, fallback: number): number {
  const raw = process.env[name]
  if (raw === undefined || raw === '') return fallback
  const n = Number(raw)
  if (!Number.isFinite(n) || n < 0)
    throw new Error(`${name} must be a non-negative number, got ${raw}`)
  return n
}

const minutes = intEnv('FUZZ_MINUTES', 10)
const minLength = intEnv('FUZZ_MIN_LENGTH', 5)
const maxLength = Math.max(minLength, intEnv('FUZZ_MAX_LENGTH', 60))
const replay = process.env.FUZZ_SEEDS?.split(',').filter(Boolean).map(Number)
if (replay?.some((s) => !Number.isSafeInteger(s))) throw new Error('FUZZ_SEEDS must list integers')
const first = intEnv('FUZZ_FIRST_SEED', Date.now() % 1_000_000_000)

function* counting(from: number) {
  for (let s = from; ; s++) yield s
}

const fuzzer = await Fuzzer.start()
const started = Date.now()
let lastReport = started
try {
  console.log(
    replay
      ? `fuzzing seeds ${replay.join(', ')}`
      : `fuzzing for ${minutes} min from seed ${first}, ${minLength}–${maxLength} events per sequence`,
  )
  const result = await runCampaign(fuzzer, {
    seeds: replay ?? counting(first),
    minLength,
    maxLength,
    until: replay ? undefined : started + minutes * 60_000,
    onSequence: (seed, diffs) => {
      if (diffs) console.log(`seed ${seed}: ${diffs} differences, shrinking…`)
      if (Date.now() - lastReport > 30_000) {
        lastReport = Date.now()
        console.log(`… seed ${seed}, ${((Date.now() - started) / 60_000).toFixed(1)} min`)
      }
    },
  })
  for (const f of result.failures) {
    console.log(
      `\n--- seed ${f.seed}: ${f.differences.length} differences; shrunk to ${f.shrunk.length} events`,
    )
    for (const d of f.differences.slice(0, 4))
      console.log(`batch size ${d.batchSize}, ${d.kind}: ${d.detail}`)
    console.log(`\n${f.script}\n`)
  }
  console.log(
    `fuzz: ${result.sequences} sequences, ${result.ops} ops, ${result.differences} differences`,
  )
  if (result.differences) process.exitCode = 1
} finally {
  await fuzzer.close()
}
