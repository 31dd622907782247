import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);
const packageDir = fileURLToPath(new URL('..', import.meta.url));
const root = fileURLToPath(new URL('../../../', import.meta.url));
/** The root README and each package's, relative to the repository root. */
const readmes = [
  'README.md',
  ...readdirSync(`${root}packages`)
    .map((name) => `packages/${name}/README.md`)
    .filter((path) => existsSync(`${root}${path}`)),
];

/** Every ```ts block of the README, named after the heading above it. */
function snippets(markdown: string) {
  const found: { heading: string; code: string; line: number }[] = [];
  let heading = '(top)';
  const lines = markdown.split('\n');
  for (let index = 0; index < lines.length; index++) {
    const line = lines[index]!;
    if (line.startsWith('#')) heading = line.replace(/^#+\s*/, '');
    if (line.trim() === '```ts') {
      const start = index + 1;
      let end = start;
      while (end < lines.length && lines[end]!.trim() !== '```') end++;
      found.push({ heading, code: lines.slice(start, end).join('\n'), line: start });
      index = end;
    }
  }
  return found;
}

const blocks = readmes.flatMap((readme) =>
  snippets(readFileSync(`${root}${readme}`, 'utf8')).map((block) => ({ ...block, readme })),
);
const workDir = `${packageDir}.snippets`;
rmSync(workDir, { recursive: true, force: true });
mkdirSync(workDir, { recursive: true });

describe('README snippets run as written', () => {
  it('has snippets to run', () => {
    expect(blocks.length).toBeGreaterThan(10);
  });

  for (const [index, block] of blocks.entries()) {
    it(`${block.readme}: ${block.heading} (line ${block.line})`, async () => {
      // A snippet whose first line is a comment naming a `.test.ts` file is a vitest file.
      const isTestFile = /^\/\/ \S+\.test\.ts\b/.test(block.code);
      const file = `${workDir}/snippet-${String(index).padStart(2, '0')}${isTestFile ? '.test' : ''}.ts`;
      writeFileSync(file, block.code);
      const command = isTestFile
        ? ['vitest', 'run', '--config', 'vitest.snippets.config.ts', file]
        : ['tsx', '--conditions=@idem/source', file];
      const { stderr } = await run('npx', command, {
        cwd: packageDir,
        timeout: 60_000,
        env: { ...process.env, NODE_NO_WARNINGS: '1' },
      });
      if (!isTestFile) expect(stderr).toBe('');
    });
  }
});
