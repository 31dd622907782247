import { workspaceConfig } from '../../vitest.shared.js';

export default workspaceConfig({
  include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
  // A run is 1,000 calls over real HTTP and Postgres by design (the README quotes its
  // numbers): 2–15 s alone on 2 cores, 7–38 s measured beside two CPU-burning loops on a
  // machine already loaded. The bound is there to catch a hang, not to time the run.
  testTimeout: 300_000,
});
