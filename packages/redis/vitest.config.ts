import { defineConfig } from 'vitest/config';

export default defineConfig({
  resolve: { conditions: ['@idem/source'] },
  ssr: { resolve: { conditions: ['@idem/source'] } },
  test: {
    // Each file starts its own redis-server (or a cluster of three) and the contract sends
    // 1 MB payloads: on a loaded 2-core machine that takes far longer than 5 s.
    testTimeout: 60_000,
    hookTimeout: 120_000,
    include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
  },
});
