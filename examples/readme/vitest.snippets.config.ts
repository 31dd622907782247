import { defineConfig } from 'vitest/config';

/** Runs README snippets that are themselves vitest files (their first line names one). */
export default defineConfig({
  resolve: { conditions: ['@idem/source'] },
  ssr: { resolve: { conditions: ['@idem/source'] } },
  // A snippet's test starts PGlite or Postgres clients: on a loaded 2-core machine that
  // takes far longer than vitest's 5 s default.
  test: { include: ['.snippets/**/*.test.ts'], testTimeout: 120_000, hookTimeout: 120_000 },
});
