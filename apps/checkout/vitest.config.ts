import { defineConfig } from 'vitest/config';

export default defineConfig({
  resolve: { conditions: ['@idem/source'] },
  ssr: { resolve: { conditions: ['@idem/source'] } },
  test: {
    include: ['src/**/*.test.ts', 'e2e/**/*.e2e.test.ts'],
    // Builds the app if needed and starts `next start` on PGlite in a temp folder.
    globalSetup: ['e2e/globalSetup.ts'],
    // One server, one browser: the scenarios run one after another.
    fileParallelism: false,
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
