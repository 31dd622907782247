import { workspaceConfig } from '../vitest.shared.js';

export default workspaceConfig({ include: ['scripts/**/*.test.mjs'] });
