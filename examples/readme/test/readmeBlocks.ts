import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface ReadmeBlock {
  /** The markdown file (a README or a docs page), relative to the repository root. */
  readme: string;
  /** The heading above the block. */
  heading: string;
  code: string;
  /** The line of the block's opening fence in the file, counting from 1. */
  line: number;
}

/** The root README and each package's, relative to the repository root (`root` ends in `/`). */
export function readmes(root: string): string[] {
  return [
    'README.md',
    ...readdirSync(`${root}packages`)
      .map((name) => `packages/${name}/README.md`)
      .filter((path) => existsSync(`${root}${path}`)),
  ];
}

/**
 * Every page of the documentation site (docs/**\/*.md), relative to the repository root,
 * except the API reference (docs/api, generated from the packages' TSDoc).
 */
export function docsPages(root: string): string[] {
  const pages: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(`${root}${dir}`, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) {
        if (!['api', 'node_modules', '.vitepress', 'public'].includes(entry.name)) walk(path);
      } else if (entry.name.endsWith('.md')) pages.push(path);
    }
  };
  if (existsSync(`${root}docs`)) walk('docs');
  return pages.sort();
}

/** Every ```<language> block of `files` (relative to `root`). */
export function blocksIn(root: string, files: readonly string[], language: string): ReadmeBlock[] {
  return files.flatMap((readme) =>
    blocksOf(readFileSync(`${root}${readme}`, 'utf8'), language).map((block) => ({
      ...block,
      readme,
    })),
  );
}

/** Every ```<language> block of the root README and each package's (`root` ends in `/`). */
export function readmeBlocks(root: string, language: string): ReadmeBlock[] {
  return blocksIn(root, readmes(root), language);
}

/**
 * Whether `line` opens a ```<language> block: the language alone, or with what VitePress
 * reads after it, a title (```ts [server.ts]) or lines to highlight (```ts {2,4}).
 */
function opens(line: string, language: string): boolean {
  const fence = line.trim();
  if (!fence.startsWith(`\`\`\`${language}`)) return false;
  return /^(\s*(\[[^\]]*\]|\{[^}]*\}))*\s*$/.test(fence.slice(3 + language.length));
}

/** The ```<language> blocks of one markdown text, named after the heading above each. */
function blocksOf(markdown: string, language: string) {
  const found: { heading: string; code: string; line: number }[] = [];
  let heading = '(top)';
  /** The index of the first line of the block being read, if one is open. */
  let start: number | undefined;
  let fenced = false;
  const lines = markdown.split('\n');
  for (const [index, line] of lines.entries()) {
    if (start === undefined) {
      // A heading's explicit id (`## INVALID_KEY {#invalid_key}`) is not part of its name.
      if (!fenced && line.startsWith('#')) {
        heading = line.replace(/^#+\s*/, '').replace(/\s*\{#[^}]*\}\s*$/, '');
      }
      if (opens(line, language)) start = index + 1;
      // A fence of another language: a `#` inside it is no heading.
      else if (line.trim().startsWith('```')) fenced = !fenced;
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
