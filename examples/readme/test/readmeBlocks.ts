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
  /** The first line of the block being read, if one is open. */
  let start: number | undefined;
  const lines = markdown.split('\n');
  for (const [index, line] of lines.entries()) {
    if (start === undefined) {
      if (line.startsWith('#')) heading = line.replace(/^#+\s*/, '');
      if (line.trim() === `\`\`\`${language}`) start = index + 1;
    } else if (line.trim() === '```') {
      found.push({ heading, code: lines.slice(start, index).join('\n'), line: start });
      start = undefined;
    }
  }
  // A block left open runs to the end.
  if (start !== undefined) {
    found.push({ heading, code: lines.slice(start).join('\n'), line: start });
  }
  return found;
}
