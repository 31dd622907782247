import { defineConfig } from 'vitest/config';

export default defineConfig({
  resolve: { conditions: ['@idem/source'] },
  ssr: { resolve: { conditions: ['@idem/source'] } },
  test: { include: ['src/**/*.test.ts'] },
});
