import { workspaceConfig } from '../../vitest.shared.js';

export default workspaceConfig({ include: ['src/**/*.test.ts', 'test/**/*.test.ts'] });
