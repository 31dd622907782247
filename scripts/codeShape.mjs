// The shape the project keeps its code in, measured over the working tree: files and
// functions small enough to read, no import cycles, and only dependencies' public API.
// `scripts/codeShape.test.mjs` asserts these (part of `pnpm test:packaging`);
// `node scripts/codeShape.mjs` prints every finding.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

export const root = fileURLToPath(new URL('..', import.meta.url));

/** The most lines a file under packages/*\/src holds, and a function outside tests. */
export const MAX_FILE_LINES = 300;
export const MAX_FUNCTION_LINES = 80;

/** The files git knows (tracked, or new and not ignored) matching the pathspecs. */
export function filesOf(...pathspecs) {
  const listed = execFileSync(
    'git',
    ['ls-files', '--cached', '--others', '--exclude-standard', '--', ...pathspecs],
    { cwd: root, encoding: 'utf8' },
  );
  return listed
    .split('\n')
    .filter((file) => file && existsSync(join(root, file)))
    .sort();
}

const isTest = (file) => /\.test\.tsx?$/.test(file);
const sourceOf = (file) =>
  ts.createSourceFile(file, readFileSync(join(root, file), 'utf8'), ts.ScriptTarget.Latest, true);

/** Files over `MAX_FILE_LINES` lines, as `{ file, lines }`. */
export function longFiles(files) {
  return files.flatMap((file) => {
    const lines = readFileSync(join(root, file), 'utf8').replace(/\n$/, '').split('\n').length;
    return lines > MAX_FILE_LINES ? [{ file, lines }] : [];
  });
}

/**
 * Functions whose body spans more than `MAX_FUNCTION_LINES` lines, in files that are not
 * tests (a test's `describe` callback is a list of cases, not a function to read through).
 */
export function longFunctions(files) {
  const found = [];
  for (const file of files.filter((name) => !isTest(name))) {
    const source = sourceOf(file);
    const line = (position) => source.getLineAndCharacterOfPosition(position).line + 1;
    const visit = (node) => {
      if (ts.isFunctionLike(node) && node.body) {
        const lines = line(node.body.getEnd()) - line(node.body.getStart()) + 1;
        if (lines > MAX_FUNCTION_LINES) found.push({ file, line: line(node.getStart()), lines });
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return found;
}

/**
 * Import cycles among `files` (relative imports, and `@/…` for `paths` aliases to
 * `aliasRoot`), each as the list of files around it. Type-only imports count too: a
 * cycle of types is still two modules that cannot be read one without the other.
 */
export function importCycles(files, aliasRoot) {
  const known = new Set(files);
  const edges = new Map();
  for (const file of files) {
    const { importedFiles } = ts.preProcessFile(readFileSync(join(root, file), 'utf8'), true, true);
    const targets = new Set();
    for (const { fileName: specifier } of importedFiles) {
      const base = specifier.startsWith('.')
        ? resolve(root, dirname(file), specifier)
        : aliasRoot && specifier.startsWith('@/')
          ? resolve(root, aliasRoot, specifier.slice(2))
          : undefined;
      if (!base) continue;
      const stem = base.replace(/\.js$/, '');
      const target = ['.ts', '.tsx', '/index.ts', '/index.tsx']
        .map((ending) => relative(root, `${stem}${ending}`))
        .find((candidate) => known.has(candidate));
      if (target) targets.add(target);
    }
    edges.set(file, [...targets]);
  }
  // Tarjan's strongly connected components: each component of more than one file is a cycle.
  const cycles = [];
  const index = new Map();
  const low = new Map();
  const stack = [];
  const onStack = new Set();
  let counter = 0;
  const connect = (file) => {
    index.set(file, counter);
    low.set(file, counter);
    counter++;
    stack.push(file);
    onStack.add(file);
    for (const target of edges.get(file) ?? []) {
      if (!index.has(target)) {
        connect(target);
        low.set(file, Math.min(low.get(file), low.get(target)));
      } else if (onStack.has(target)) {
        low.set(file, Math.min(low.get(file), index.get(target)));
      }
    }
    if (low.get(file) !== index.get(file)) return;
    const component = [];
    let member;
    do {
      member = stack.pop();
      onStack.delete(member);
      component.push(member);
    } while (member !== file);
    if (component.length > 1) cycles.push(component.sort());
  };
  for (const file of files) if (!index.has(file)) connect(file);
  return cycles;
}

/**
 * Uses of a dependency's internals: `._.` on a Drizzle object (its private metadata),
 * a cast to `TemplateStringsArray` (building Drizzle's `sql` tag from rendered text), and
 * tRPC's `_def`. Each as `{ file, line, text }`. A line that ends in an
 * `// internal-api: …` comment is the one deliberate use, whose reason is written there.
 */
export function internalUses(files) {
  const patterns = [/\._\./, /as\s+(unknown\s+as\s+)?TemplateStringsArray/, /\b_def\b/];
  const found = [];
  for (const file of files) {
    const lines = readFileSync(join(root, file), 'utf8').split('\n');
    lines.forEach((text, index) => {
      if (/\/\/ internal-api: /.test(text)) return;
      const code = text.replace(/\/\/.*$/, '').replace(/^\s*\*.*$/, '');
      if (patterns.some((pattern) => pattern.test(code))) {
        found.push({ file, line: index + 1, text: text.trim() });
      }
    });
  }
  return found;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const sources = filesOf('packages/*/src/**');
  const code = sources.filter((file) => /\.tsx?$/.test(file));
  for (const { file, lines } of longFiles(code)) console.log(`file ${lines} lines: ${file}`);
  for (const { file, line, lines } of longFunctions(code)) {
    console.log(`function ${lines} lines: ${file}:${line}`);
  }
  for (const cycle of importCycles(filesOf('packages/core/src/**.ts'))) {
    console.log(`import cycle among: ${cycle.join(', ')}`);
  }
  const app = filesOf('apps/checkout/src/**.ts', 'apps/checkout/src/**.tsx');
  for (const cycle of importCycles(app, 'apps/checkout/src')) {
    console.log(`import cycle among: ${cycle.join(', ')}`);
  }
  for (const { file, line, text } of internalUses(code.filter((file) => !isTest(file)))) {
    console.log(`internals: ${file}:${line}: ${text}`);
  }
}
