import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it, vi } from 'vitest';

const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
const workDir = fileURLToPath(new URL('../.snippets/', import.meta.url));

/** Every ```ts block of the README, named after the heading above it. */
function snippets(markdown: string) {
  const found: { heading: string; code: string; line: number }[] = [];
  let heading = '(top)';
  const lines = markdown.split('\n');
  for (let index = 0; index < lines.length; index++) {
    const line = lines[index] ?? '';
    if (line.startsWith('#')) heading = line.replace(/^#+\s*/, '');
    if (line.trim() === '```ts') {
      const start = index + 1;
      let end = start;
      while (end < lines.length && lines[end]?.trim() !== '```') end++;
      found.push({ heading, code: lines.slice(start, end).join('\n'), line: start + 1 });
      index = end;
    }
  }
  return found;
}

const blocks = snippets(readme);
rmSync(workDir, { recursive: true, force: true });
mkdirSync(workDir, { recursive: true });

describe('README snippets run as written', () => {
  it('has snippets to run', () => {
    expect(blocks.length).toBeGreaterThanOrEqual(6);
  });

  for (const [index, block] of blocks.entries()) {
    it(`${block.heading} (README.md:${block.line})`, async () => {
      const warn = vi.spyOn(console, 'warn');
      const file = `${workDir}snippet-${String(index).padStart(2, '0')}.ts`;
      writeFileSync(file, `${block.code}\nexport {};\n`);
      // The snippets import '@idem/client' by name: the package resolves itself (Node's
      // self-reference through "exports", with the @idem/source condition of vitest.config.ts).
      await import(/* @vite-ignore */ file);
      expect(warn).not.toHaveBeenCalled();
      warn.mockRestore();
    });
  }
});
