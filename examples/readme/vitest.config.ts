import { defineConfig } from 'vitest/config';

export default defineConfig({
  // In-process imports (the React snippets' test) run the workspace packages from source.
  resolve: { conditions: ['@idem/source'] },
  ssr: { resolve: { conditions: ['@idem/source'] } },
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    // Packs the packages for the tests that install them outside the workspace.
    globalSetup: ['test/globalSetup.ts'],
  },
});
