import { defineConfig } from 'vitest/config';

export default defineConfig({
  resolve: { conditions: ['@idem/source'] },
  ssr: { resolve: { conditions: ['@idem/source'] } },
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
    // A run is 1,000 calls over real HTTP and Postgres, 2–8 s alone on 2 cores; CI runs
    // every package's tests at once, so leave room. Creating and migrating the scratch
    // database takes a few seconds on a loaded machine too.
    testTimeout: 60_000,
    hookTimeout: 30_000,
  },
});
