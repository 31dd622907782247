import { defineConfig, type ViteUserConfig } from 'vitest/config';

type TestOptions = NonNullable<ViteUserConfig['test']>;

/**
 * Every package's vitest config: the workspace packages resolved from source, and timeouts
 * that catch a hang without timing the machine. The suites run side by side on a shared
 * 2-core machine, under `turbo` beside other suites and possibly beside other work: a
 * PGlite start that takes 1 s idle took 6.5 s there, a scratch database and a browser
 * longer. A test that needs a longer bound (a run of 1,000 calls) says so itself.
 */
export function workspaceConfig(test: TestOptions) {
  return defineConfig({
    resolve: { conditions: ['@idem/source'] },
    ssr: { resolve: { conditions: ['@idem/source'] } },
    test: { testTimeout: 120_000, hookTimeout: 180_000, ...test },
  });
}
