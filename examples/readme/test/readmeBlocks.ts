import { existsSync, readdirSync, readFileSync } from 'node:fs';

export interface ReadmeBlock {
  /** The README, relative to the repository root. */
  readme: string;
  /** The heading above the block. */
  heading: string;
  code: string;
  /** The block's first line in the README, counting from 0. */
  line: number;
}

/** Every ```<language> block of the root README and each package's (`root` ends in `/`). */
export function readmeBlocks(root: string, language: string): ReadmeBlock[] {
  const readmes = [
    'README.md',
    ...readdirSync(`${root}packages`)
      .map((name) => `packages/${name}/README.md`)
      .filter((path) => existsSync(`${root}${path}`)),
  ];
  return readmes.flatMap((readme) =>
    blocksOf(readFileSync(`${root}${readme}`, 'utf8'), language).map((block) => ({
      ...block,
      readme,
    })),
  );
}

/** The ```<language> blocks of one markdown text, named after the heading above each. */
function blocksOf(markdown: string, language: string) {
  const found: { heading: string; code: string; line: number }[] = [];
  let heading = '(top)';
  const lines = markdown.split('\n');
  for (let index = 0; index < lines.length; index++) {
    const line = lines[index]!;
    if (line.startsWith('#')) heading = line.replace(/^#+\s*/, '');
    if (line.trim() === `\`\`\`${language}`) {
      const start = index + 1;
      let end = start;
      while (end < lines.length && lines[end]!.trim() !== '```') end++;
      found.push({ heading, code: lines.slice(start, end).join('\n'), line: start });
      index = end;
    }
  }
  return found;
}
