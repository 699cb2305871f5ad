import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['tests/**/*.test.ts', 'packages/*/src/**/*.test.ts'],
    testTimeout: 120_000,
    hookTimeout: 180_000,
    // e2e suites start whole networks; keep them from fighting over 2 cores.
    fileParallelism: false,
    pool: 'forks',
  },
})
