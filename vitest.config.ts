import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    testTimeout: 120_000,
    hookTimeout: 180_000,
    // e2e suites start whole networks; keep them from fighting over 2 cores.
    fileParallelism: false,
    pool: 'forks',
    projects: [
      // Pure code tested beside it, in milliseconds: `pnpm test:unit`, run first by CI.
      {
        extends: true,
        test: { name: 'unit', include: ['packages/*/src/**/*.test.ts', 'scripts/**/*.test.ts'] },
      },
      // Real Postgres, Redis, PDS and the stock AppView: the differential suites.
      { extends: true, test: { name: 'suite', include: ['tests/**/*.test.ts'] } },
    ],
  },
})
