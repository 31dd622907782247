import { workspaceConfig } from '../../vitest.shared.js';

export default workspaceConfig({
  include: ['src/**/*.test.ts', 'e2e/**/*.e2e.test.ts'],
  // Builds the app if needed and starts `next start` on PGlite in a temp folder.
  globalSetup: ['e2e/globalSetup.ts'],
  // One server, one browser: the scenarios run one after another.
  fileParallelism: false,
});
