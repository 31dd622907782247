// The API report: for each package under packages/, every name each entry of its package.json
// `exports` makes public, with its kind, written to packages/<name>/api-report.md and checked
// in, so a change to the public surface shows up in review and happens only on purpose.
//
//   node scripts/apiReport.mjs           write the reports (`pnpm api:report`)
//   node scripts/apiReport.mjs --check   fail with a diff when a checked-in report differs
//
// Entries are read from source (the `@idem/source` condition), so no build is needed.
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import ts from 'typescript';

const root = fileURLToPath(new URL('..', import.meta.url));
export const REPORT_FILE = 'api-report.md';
const SOURCE_CONDITION = '@idem/source';

/** Every package directory under `packagesDir` that has a package.json. */
export function packageDirs(packagesDir = join(root, 'packages')) {
  return readdirSync(packagesDir, { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .map((entry) => join(packagesDir, entry.name))
    .filter((dir) => existsSync(join(dir, 'package.json')));
}

/** `[specifier, file]` for each entry of a package's `exports`, the source file if it names one. */
function entriesOf(dir, manifest) {
  const exports =
    typeof manifest.exports === 'string' ? { '.': manifest.exports } : (manifest.exports ?? {});
  return Object.entries(exports).map(([subpath, target]) => {
    const file =
      typeof target === 'string'
        ? target
        : (target[SOURCE_CONDITION] ?? target.types ?? target.import ?? target.default);
    if (typeof file !== 'string') {
      throw new Error(`${manifest.name}: cannot tell which file "exports"["${subpath}"] names`);
    }
    return { specifier: `${manifest.name}${subpath.slice(1)}`, file: resolve(dir, file) };
  });
}

/** What a symbol is, in the words a reader uses: "function", "const + type", … */
function kindOf(symbol) {
  const kinds = new Set();
  for (const declaration of symbol.declarations ?? []) {
    if (ts.isFunctionDeclaration(declaration)) kinds.add('function');
    else if (ts.isClassDeclaration(declaration)) kinds.add('class');
    else if (ts.isInterfaceDeclaration(declaration)) kinds.add('interface');
    else if (ts.isTypeAliasDeclaration(declaration)) kinds.add('type');
    else if (ts.isEnumDeclaration(declaration)) kinds.add('enum');
    else if (ts.isModuleDeclaration(declaration)) kinds.add('namespace');
    else if (ts.isVariableDeclaration(declaration)) {
      const isConst = (ts.getCombinedNodeFlags(declaration) & ts.NodeFlags.Const) !== 0;
      kinds.add(isConst ? 'const' : 'let');
    } else kinds.add(ts.SyntaxKind[declaration.kind]);
  }
  return [...kinds].sort().join(' + ') || 'unknown';
}

/** The package a file belongs to (nearest package.json's name), for names re-exported from another. */
function packageNameOf(file, cache) {
  const dir = dirname(file);
  while (!cache.has(dir)) {
    const manifest = join(dir, 'package.json');
    if (existsSync(manifest)) {
      cache.set(dir, JSON.parse(readFileSync(manifest, 'utf8')).name ?? null);
    } else if (dirname(dir) === dir) {
      cache.set(dir, null);
    } else {
      const parent = dirname(dir);
      const name = packageNameOf(join(parent, 'x'), cache);
      cache.set(dir, name);
    }
  }
  return cache.get(dir);
}

/**
 * The reports of the given package directories, in memory: `Map<reportPath, text>`. One
 * TypeScript program for all of them, so a name re-exported across packages resolves once.
 */
export function buildReports(dirs) {
  const packages = dirs.map((dir) => {
    const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
    return { dir, manifest, entries: entriesOf(dir, manifest) };
  });
  const program = ts.createProgram(
    packages.flatMap(({ entries }) => entries.map(({ file }) => file)),
    {
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      target: ts.ScriptTarget.ES2022,
      customConditions: [SOURCE_CONDITION],
      allowJs: true,
      noEmit: true,
      skipLibCheck: true,
      types: [],
    },
  );
  const checker = program.getTypeChecker();
  const packageNames = new Map();
  const reports = new Map();
  for (const { dir, manifest, entries } of packages) {
    const sections = entries.map(({ specifier, file }) => {
      const sourceFile = program.getSourceFile(file);
      if (!sourceFile) throw new Error(`${specifier}: ${relative(root, file)} not found`);
      const moduleSymbol = checker.getSymbolAtLocation(sourceFile);
      const exported = moduleSymbol ? checker.getExportsOfModule(moduleSymbol) : [];
      const lines = exported
        .map((symbol) => {
          const target =
            symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol;
          if (!target.declarations?.length) {
            throw new Error(
              `${specifier}: cannot resolve the export \`${symbol.name}\` (does the entry typecheck?)`,
            );
          }
          const declaredIn = target.declarations[0].getSourceFile().fileName;
          const owner = declaredIn ? packageNameOf(declaredIn, packageNames) : null;
          const from = owner && owner !== manifest.name ? ` (from ${owner})` : '';
          return { name: symbol.name, line: `- \`${symbol.name}\`: ${kindOf(target)}${from}` };
        })
        .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
        .map(({ line }) => line);
      return [`## ${specifier} (${lines.length})`, '', ...lines].join('\n');
    });
    const text = [
      `# ${manifest.name}: API report`,
      '',
      'Every name each entry of package.json `exports` makes public, with its kind. Generated by',
      '`pnpm api:report`; `pnpm test` fails when it no longer matches the code, so the public',
      'surface changes only on purpose: after such a change, run `pnpm api:report` and commit',
      'this file with it.',
      '',
      sections.join('\n\n'),
      '',
    ].join('\n');
    reports.set(join(dir, REPORT_FILE), text);
  }
  return reports;
}

/** A unified-style diff of two texts (longest common subsequence of lines), changes only. */
export function diffLines(before, after) {
  const a = before.split('\n');
  const b = after.split('\n');
  const lengths = Array.from({ length: a.length + 1 }, () => new Array(b.length + 1).fill(0));
  for (let i = a.length - 1; i >= 0; i--) {
    for (let j = b.length - 1; j >= 0; j--) {
      lengths[i][j] =
        a[i] === b[j] ? lengths[i + 1][j + 1] + 1 : Math.max(lengths[i + 1][j], lengths[i][j + 1]);
    }
  }
  const out = [];
  let section = null;
  let printedSection = null;
  const emit = (line) => {
    if (section !== printedSection) {
      out.push(`  ${section}`);
      printedSection = section;
    }
    out.push(line);
  };
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) {
    if (i < a.length && j < b.length && a[i] === b[j]) {
      if (a[i].startsWith('## ')) section = a[i];
      i++;
      j++;
    } else if (j < b.length && (i === a.length || lengths[i][j + 1] >= lengths[i + 1][j])) {
      emit(`+ ${b[j]}`);
      j++;
    } else {
      emit(`- ${a[i]}`);
      i++;
    }
  }
  return out.join('\n');
}

/** Compares the reports with the files on disk: the stale ones with their diffs. */
export function staleReports(reports) {
  const stale = [];
  for (const [path, text] of reports) {
    if (!existsSync(path)) {
      stale.push({ path, diff: '(no report checked in)' });
      continue;
    }
    const current = readFileSync(path, 'utf8');
    if (current !== text) stale.push({ path, diff: diffLines(current, text) });
  }
  return stale;
}

function main(args) {
  const reports = buildReports(packageDirs());
  if (!args.includes('--check')) {
    for (const [path, text] of reports) writeFileSync(path, text);
    console.log(
      `api report: wrote ${[...reports.keys()].map((p) => relative(root, p)).join(', ')}`,
    );
    return;
  }
  const stale = staleReports(reports);
  for (const { path, diff } of stale) {
    console.error(`\n${relative(root, path).split(sep).join('/')} (- checked in, + the code now):`);
    console.error(diff);
  }
  if (stale.length > 0) {
    console.error('\nThe public surface changed: run `pnpm api:report` and commit the report(s).');
    process.exit(1);
  }
  console.log(`api report: ${reports.size} reports match the code`);
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  main(process.argv.slice(2));
}
