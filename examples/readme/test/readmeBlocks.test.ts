import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { root } from './outsideInstall.js';
import { blocksIn, docsPages } from './readmeBlocks.js';

describe('the markdown blocks the snippet suites run', () => {
  it('finds every docs page except the generated API reference', () => {
    const pages = docsPages(root);
    expect(pages).toContain('docs/index.md');
    expect(pages.some((page) => page.startsWith('docs/guide/'))).toBe(true);
    expect(pages.filter((page) => page.startsWith('docs/api/'))).toEqual([]);
  });

  it('reads titled blocks, explicit heading ids and headings only outside fences', () => {
    const dir = `${mkdtempSync(join(tmpdir(), 'idem-blocks-'))}/`;
    try {
      writeFileSync(
        `${dir}page.md`,
        [
          '# Page',
          '## INVALID_KEY {#invalid_key}',
          '```sh',
          '# a comment, not a heading',
          '```',
          '```ts [server.ts]',
          'one();',
          '```',
          '```tsx',
          'skipped();',
          '```',
          '```ts {2}',
          'two();',
          '```',
        ].join('\n'),
      );
      expect(blocksIn(dir, ['page.md'], 'ts')).toEqual([
        { readme: 'page.md', heading: 'INVALID_KEY', code: 'one();', line: 6 },
        { readme: 'page.md', heading: 'INVALID_KEY', code: 'two();', line: 12 },
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
