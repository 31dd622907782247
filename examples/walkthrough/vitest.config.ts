import { defineConfig } from 'vitest/config';

export default defineConfig({
  resolve: { conditions: ['@idem/source'] },
  ssr: { resolve: { conditions: ['@idem/source'] } },
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
    // The suite runs beside other suites on a shared 2-core machine: the property tests
    // and first imports take far longer there than vitest's 5 s default allows.
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
