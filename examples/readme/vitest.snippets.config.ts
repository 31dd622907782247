import { defineConfig } from 'vitest/config';

/** Runs README snippets that are themselves vitest files (their first line names one). */
export default defineConfig({
  resolve: { conditions: ['@idem/source'] },
  ssr: { resolve: { conditions: ['@idem/source'] } },
  test: { include: ['.snippets/**/*.test.ts'] },
});
