import { workspaceConfig } from '../../vitest.shared.js';

// In-process imports (the React snippets' test) run the workspace packages from source.
export default workspaceConfig({
  include: ['test/**/*.test.ts'],
  // Packs the packages for the tests that install them outside the workspace.
  globalSetup: ['test/globalSetup.ts'],
});
