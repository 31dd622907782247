// The API report: for each package under packages/, every name each entry of its package.json
// `exports` makes public, with its declaration as the built `.d.ts` gives it to users (function
// signatures with their overloads, interfaces and classes member by member, type aliases, the
// types of consts), written to packages/<name>/api-report.md and checked in, so a change to the
// public surface, down to the type of one option, shows up in review and happens only on purpose.
//
//   node scripts/apiReport.mjs [dir…]           write the reports (`pnpm api:report` builds first)
//   node scripts/apiReport.mjs --check [dir…]   fail with a diff when a checked-in report differs
//
// With directories, only those packages; without, every one under packages/.
//
// The entries are read from the built declarations (each entry's `types` condition, under
// dist/), so the packages must be built: `pnpm test:packaging` and `pnpm api:report` build them
// first. Besides its own members, an interface (or class, or type alias of an intersection)
// lists the members it inherits from declarations in the workspace, each group under the name
// that declares it, so a change to a shared base interface is a diff in every report that
// inherits it. Declarations the exports use that no entry exports (a base options interface
// kept internal) are written at the end, under "Referenced, not exported".
import { spawnSync } from 'node:child_process';
import {
  existsSync,
  readdirSync,
  readFileSync,
  realpathSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import ts from 'typescript';

const root = fileURLToPath(new URL('..', import.meta.url));
export const REPORT_FILE = 'api-report.md';
const INDENT = '  ';

/** Every package directory under `packagesDir` that has a package.json. */
export function packageDirs(packagesDir = join(root, 'packages')) {
  return readdirSync(packagesDir, { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .map((entry) => join(packagesDir, entry.name))
    .filter((dir) => existsSync(join(dir, 'package.json')));
}

/** `{ specifier, file }` for each entry of a package's `exports`: the declaration file it names. */
function entriesOf(dir, manifest) {
  const exports =
    typeof manifest.exports === 'string' ? { '.': manifest.exports } : (manifest.exports ?? {});
  return Object.entries(exports).map(([subpath, target]) => {
    const file = typeof target === 'string' ? target : target.types;
    if (typeof file !== 'string' || !/\.d\.[cm]?ts$/.test(file)) {
      throw new Error(
        `${manifest.name}: "exports"["${subpath}"] names no declaration file (a "types" condition)`,
      );
    }
    const path = resolve(dir, file);
    if (!existsSync(path)) {
      throw new Error(
        `${manifest.name}: ${file} not found; build the packages first ` +
          "(turbo run build --filter='./packages/*', which `pnpm api:report` runs)",
      );
    }
    return { specifier: `${manifest.name}${subpath.slice(1)}`, file: path };
  });
}

/** The newest modification time of the files under `dir` (0 when there is none). */
function newestMtime(dir) {
  if (!existsSync(dir)) return 0;
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) {
      newest = Math.max(newest, statSync(join(entry.parentPath, entry.name)).mtimeMs);
    }
  }
  return newest;
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
    else if (ts.isModuleDeclaration(declaration) || ts.isSourceFile(declaration)) {
      kinds.add('namespace');
    } else if (ts.isVariableDeclaration(declaration)) {
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

/** Ours, not a dependency's or the standard library's: a declaration outside node_modules. */
function inWorkspace(node) {
  return !node.getSourceFile().fileName.split(/[\\/]/).includes('node_modules');
}

const compareNames = (a, b) => (a < b ? -1 : a > b ? 1 : 0);

const fileOf = (node) => node.getSourceFile().fileName;

/** Whitespace normalized: one line, single spaces. */
const oneLine = (text) => text.replace(/\s*\n\s*/g, ' ').trim();

/** `export`, `default` and `declare` say how a .d.ts file states a name, not what it is. */
const withoutExport = (text) => text.replace(/^(?:export\s+)?(?:default\s+)?(?:declare\s+)?/, '');

const isPrivate = (member) =>
  (member.name && ts.isPrivateIdentifier(member.name)) ||
  (ts.getCombinedModifierFlags(member) & ts.ModifierFlags.Private) !== 0;

/** Whether `inner` lies within `outer` (same file, inside its span). */
const within = (inner, outer) =>
  inner.getSourceFile() === outer.getSourceFile() &&
  inner.pos >= outer.pos &&
  inner.end <= outer.end;

/** The declarations read as a user's TypeScript reads them: the options of tsconfig.base.json. */
const COMPILER_OPTIONS = {
  module: ts.ModuleKind.NodeNext,
  moduleResolution: ts.ModuleResolutionKind.NodeNext,
  target: ts.ScriptTarget.ES2022,
  lib: ['lib.es2023.d.ts', 'lib.dom.d.ts', 'lib.dom.iterable.d.ts'],
  strict: true,
  exactOptionalPropertyTypes: true,
  noEmit: true,
  skipLibCheck: true,
  types: [],
};

/**
 * The standard library's and the dependencies' declarations, parsed once per process (they do
 * not change while it runs; the tests build many reports): the packages' own are read afresh.
 */
const dependencySources = new Map();

/**
 * The reports of the given package directories, in memory: `Map<reportPath, text>`. One
 * TypeScript program for all of them, so a name re-exported across packages resolves once.
 */
export function buildReports(dirs) {
  const packages = dirs.map((dir) => {
    const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
    return { dir, manifest, entries: entriesOf(dir, manifest) };
  });
  const host = ts.createCompilerHost(COMPILER_OPTIONS, true);
  const readSourceFile = host.getSourceFile;
  host.getSourceFile = (fileName, ...rest) => {
    if (!fileName.split(/[\\/]/).includes('node_modules')) {
      return readSourceFile.call(host, fileName, ...rest);
    }
    if (!dependencySources.has(fileName)) {
      dependencySources.set(fileName, readSourceFile.call(host, fileName, ...rest));
    }
    return dependencySources.get(fileName);
  };
  const program = ts.createProgram(
    packages.flatMap(({ entries }) => entries.map(({ file }) => file)),
    COMPILER_OPTIONS,
    host,
  );
  const checker = program.getTypeChecker();
  const printer = ts.createPrinter({ removeComments: true, newLine: ts.NewLineKind.LineFeed });
  /** A node as the .d.ts has it, comments left out, on one line (Biome lays the report out). */
  const line = (node) =>
    oneLine(printer.printNode(ts.EmitHint.Unspecified, node, node.getSourceFile()));
  const packageNames = new Map();
  const packageOf = (node) => packageNameOf(node.getSourceFile().fileName, packageNames);
  const resolveAlias = (symbol) =>
    symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol;

  /** The name of what declares a member: its interface, class or type alias. */
  function ownerName(member) {
    for (let node = member.parent; node; node = node.parent) {
      if (
        (ts.isInterfaceDeclaration(node) ||
          ts.isClassDeclaration(node) ||
          ts.isTypeAliasDeclaration(node)) &&
        node.name
      ) {
        return node.name.text;
      }
      if (ts.isSourceFile(node)) break;
    }
    return '(anonymous)';
  }

  /** One member, as the declaration that declares it says, with the optionality it ends up with. */
  function memberLines(property) {
    const declarations = (property.declarations ?? []).filter((d) => !isPrivate(d));
    const optional = (property.flags & ts.SymbolFlags.Optional) !== 0;
    return declarations.flatMap((declaration) => {
      if (
        (ts.isPropertySignature(declaration) || ts.isPropertyDeclaration(declaration)) &&
        declaration.type
      ) {
        const readonly =
          ts.getCombinedModifierFlags(declaration) & ts.ModifierFlags.Readonly ? 'readonly ' : '';
        const name = line(declaration.name);
        return `${readonly}${name}${optional ? '?' : ''}: ${line(declaration.type)};`;
      }
      return line(declaration);
    });
  }

  /**
   * The members a type gets from declarations other than its own (its bases, the parts of an
   * intersection), those declared in the workspace, grouped by what declares them, in the
   * order they are declared there.
   */
  function inheritedLines(symbol, pkg) {
    const own = symbol.declarations ?? [];
    const type = checker.getDeclaredTypeOfSymbol(symbol);
    if (type.flags & ts.TypeFlags.Union) return [];
    const groups = new Map();
    for (const property of checker.getPropertiesOfType(type)) {
      const declarations = property.declarations ?? [];
      if (declarations.length === 0 || declarations.some((d) => own.some((o) => within(d, o))))
        continue;
      if (!declarations.every(inWorkspace) || declarations.every(isPrivate)) continue;
      const first = declarations[0];
      const from = packageOf(first);
      const group = `${ownerName(first)}${from && from !== pkg ? ` (${from})` : ''}`;
      if (!groups.has(group)) groups.set(group, []);
      groups.get(group).push({ first, lines: memberLines(property) });
    }
    return [...groups.keys()].sort(compareNames).flatMap((group) => [
      `${INDENT}// inherited from ${group}:`,
      ...groups
        .get(group)
        .sort((a, b) => compareNames(fileOf(a.first), fileOf(b.first)) || a.first.pos - b.first.pos)
        .flatMap(({ lines }) => lines.map((text) => INDENT + text)),
    ]);
  }

  const typeParameters = (declaration) =>
    declaration.typeParameters?.length
      ? `<${declaration.typeParameters.map(line).join(', ')}>`
      : '';
  const heritage = (declaration) =>
    (declaration.heritageClauses ?? []).map((clause) => ` ${line(clause)}`).join('');

  /** A declaration as the .d.ts says it, comments left out; an interface one member a line. */
  function declarationLines(symbol, declaration, pkg) {
    if (ts.isInterfaceDeclaration(declaration) || ts.isClassDeclaration(declaration)) {
      const isClass = ts.isClassDeclaration(declaration);
      const abstract =
        isClass && ts.getCombinedModifierFlags(declaration) & ts.ModifierFlags.Abstract
          ? 'abstract '
          : '';
      const head = `${abstract}${isClass ? 'class' : 'interface'} ${declaration.name?.text ?? 'default'}`;
      const inherited = declaration.heritageClauses?.length ? inheritedLines(symbol, pkg) : [];
      return [
        `${head}${typeParameters(declaration)}${heritage(declaration)} {`,
        ...declaration.members
          .filter((member) => !isPrivate(member))
          .map((member) => INDENT + line(member)),
        ...inherited,
        '}',
      ];
    }
    if (ts.isTypeAliasDeclaration(declaration)) {
      const head = `type ${declaration.name.text}${typeParameters(declaration)} =`;
      if (ts.isTypeLiteralNode(declaration.type)) {
        return [
          `${head} {`,
          ...declaration.type.members.map((member) => INDENT + line(member)),
          '};',
        ];
      }
      const lines = [`${head} ${line(declaration.type)};`];
      if (ts.isIntersectionTypeNode(declaration.type)) {
        const inherited = inheritedLines(symbol, pkg);
        if (inherited.length)
          lines.push('// members:', ...inherited.map((l) => l.slice(INDENT.length)));
      }
      return lines;
    }
    if (ts.isEnumDeclaration(declaration)) {
      const isConst = ts.getCombinedModifierFlags(declaration) & ts.ModifierFlags.Const;
      return [
        `${isConst ? 'const ' : ''}enum ${declaration.name.text} {`,
        ...declaration.members.map((member) => `${INDENT}${line(member)},`),
        '}',
      ];
    }
    if (ts.isVariableDeclaration(declaration)) {
      const isConst = (ts.getCombinedNodeFlags(declaration) & ts.NodeFlags.Const) !== 0;
      return [`${isConst ? 'const' : 'let'} ${line(declaration)};`];
    }
    if (ts.isSourceFile(declaration)) {
      const names = checker.getExportsOfModule(symbol).map((s) => s.name);
      return [`// a namespace of: ${names.sort(compareNames).join(', ')}`];
    }
    return [withoutExport(line(declaration))];
  }

  /** The symbols the type annotations under `node` name (type parameters left out). */
  function referencesUnder(node, found) {
    const visit = (child) => {
      let symbol;
      if (ts.isTypeReferenceNode(child)) symbol = checker.getSymbolAtLocation(child.typeName);
      else if (ts.isExpressionWithTypeArguments(child)) {
        symbol = checker.getSymbolAtLocation(child.expression);
      } else if (ts.isTypeQueryNode(child)) symbol = checker.getSymbolAtLocation(child.exprName);
      else if (ts.isImportTypeNode(child)) {
        const type = checker.getTypeFromTypeNode(child);
        symbol = type.aliasSymbol ?? type.symbol;
      }
      if (symbol) {
        const target = resolveAlias(symbol);
        if (!(target.flags & ts.SymbolFlags.TypeParameter) && target.declarations?.length) {
          found.add(target);
        }
      }
      if (!(ts.isClassElement(child) && isPrivate(child))) ts.forEachChild(child, visit);
    };
    visit(node);
  }

  /** A section per symbol: `### name: kind`, then its declarations in a ts code block. */
  function section(heading, symbol, pkg) {
    const lines = (symbol.declarations ?? []).flatMap((d) => declarationLines(symbol, d, pkg));
    return [heading, '', '```ts', ...lines, '```'].join('\n');
  }

  const reports = new Map();
  for (const { dir, manifest, entries } of packages) {
    const pkg = manifest.name;
    const exportedHere = new Set();
    const referenced = new Set();
    const entrySections = entries.map(({ specifier, file }) => {
      const sourceFile = program.getSourceFile(file);
      if (!sourceFile) throw new Error(`${specifier}: ${relative(root, file)} not found`);
      const moduleSymbol = checker.getSymbolAtLocation(sourceFile);
      const exported = moduleSymbol ? checker.getExportsOfModule(moduleSymbol) : [];
      const sections = exported
        .map((symbol) => {
          const target = resolveAlias(symbol);
          if (!target.declarations?.length) {
            throw new Error(
              `${specifier}: cannot resolve the export \`${symbol.name}\` (does the entry typecheck?)`,
            );
          }
          exportedHere.add(target);
          for (const declaration of target.declarations) referencesUnder(declaration, referenced);
          const owner = packageOf(target.declarations[0]);
          const from = owner && owner !== pkg ? ` (from ${owner})` : '';
          return {
            name: symbol.name,
            text: section(`### \`${symbol.name}\`: ${kindOf(target)}${from}`, target, pkg),
          };
        })
        .sort((a, b) => compareNames(a.name, b.name))
        .map(({ text }) => text);
      return [`## ${specifier} (${sections.length})`, ...sections].join('\n\n');
    });

    // What the exports use that no entry exports, declared in this package; and what that uses.
    const internal = [];
    const seen = new Set();
    const queue = [...referenced];
    while (queue.length > 0) {
      const symbol = queue.shift();
      if (seen.has(symbol)) continue;
      seen.add(symbol);
      if (exportedHere.has(symbol)) continue;
      const declarations = symbol.declarations.filter(
        (d) => inWorkspace(d) && packageOf(d) === pkg,
      );
      if (declarations.length === 0 || declarations.some((d) => ts.isSourceFile(d))) continue;
      internal.push(symbol);
      const more = new Set();
      for (const declaration of declarations) referencesUnder(declaration, more);
      queue.push(...more);
    }
    const nameCount = new Map();
    for (const symbol of internal)
      nameCount.set(symbol.name, (nameCount.get(symbol.name) ?? 0) + 1);
    const internalSections = internal
      .map((symbol) => {
        const file = relative(realpathSync(dir), symbol.declarations[0].getSourceFile().fileName);
        const where = nameCount.get(symbol.name) > 1 ? ` (${file.split(sep).join('/')})` : '';
        return {
          key: `${symbol.name}${where}`,
          text: section(`### \`${symbol.name}\`: ${kindOf(symbol)}${where}`, symbol, pkg),
        };
      })
      .sort((a, b) => compareNames(a.key, b.key))
      .map(({ text }) => text);
    if (internalSections.length > 0) {
      entrySections.push(
        [
          `## Referenced, not exported (${internalSections.length})`,
          'Declared in this package and used by the declarations above, but exported by no\n' +
            'entry: users meet them through those declarations.',
          ...internalSections,
        ].join('\n\n'),
      );
    }

    const text = [
      `# ${pkg}: API report`,
      '',
      'Every name each entry of package.json `exports` makes public, with its declaration as the',
      'built `.d.ts` gives it, comments left out; an interface lists the members it inherits after',
      'its own, and the declarations the exports use but no entry exports come last. Generated by',
      '`pnpm api:report`; `pnpm test` fails when it no longer matches the code, so the public',
      'surface, down to the type of one option, changes only on purpose: after such a change, run',
      '`pnpm api:report` and commit this file with it.',
      '',
      entrySections.join('\n\n'),
      '',
    ].join('\n');
    reports.set(join(dir, REPORT_FILE), formatted(text));
  }
  return reports;
}

/**
 * The report laid out by the repository's formatter, Biome (which formats Markdown and the
 * TypeScript in its code blocks): the same on every machine (Biome's version is pinned), and
 * left as it is by `pnpm format` and `pnpm lint`.
 */
function formatted(text) {
  const biome = createRequire(join(root, 'package.json')).resolve('@biomejs/biome/bin/biome');
  const result = spawnSync(
    process.execPath,
    [biome, 'format', `--stdin-file-path=${REPORT_FILE}`],
    {
      cwd: root,
      input: text,
      encoding: 'utf8',
      maxBuffer: 256 * 1024 * 1024,
    },
  );
  if (result.status !== 0 || !result.stdout) {
    throw new Error(`biome format failed on an API report:\n${result.stderr || result.error}`);
  }
  return result.stdout;
}

/**
 * A unified-style diff of two texts (longest common subsequence of lines), changes only,
 * each run of changes under the `##` and `###` headings (entry, name) it falls in.
 */
export function diffLines(before, after) {
  const a = before.split('\n');
  const b = after.split('\n');
  // The common start and end need no table (a report is long; a change is usually small).
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start++;
  let endA = a.length;
  let endB = b.length;
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) {
    endA--;
    endB--;
  }
  const n = endA - start;
  const m = endB - start;
  const lengths = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      lengths[i][j] =
        a[start + i] === b[start + j]
          ? lengths[i + 1][j + 1] + 1
          : Math.max(lengths[i + 1][j], lengths[i][j + 1]);
    }
  }
  const out = [];
  const headings = { '## ': null, '### ': null };
  const printed = { '## ': null, '### ': null };
  const follow = (line) => {
    if (line.startsWith('## ')) {
      headings['## '] = line;
      headings['### '] = null;
    } else if (line.startsWith('### ')) headings['### '] = line;
  };
  const emit = (line) => {
    for (const level of ['## ', '### ']) {
      if (headings[level] !== printed[level]) {
        if (headings[level] !== null) out.push(`  ${headings[level]}`);
        printed[level] = headings[level];
        if (level === '## ') printed['### '] = null;
      }
    }
    out.push(line);
  };
  for (let k = 0; k < start; k++) follow(a[k]);
  let i = 0;
  let j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[start + i] === b[start + j]) {
      follow(a[start + i]);
      i++;
      j++;
    } else if (i < n && (j === m || lengths[i + 1][j] >= lengths[i][j + 1])) {
      emit(`- ${a[start + i]}`);
      i++;
    } else {
      emit(`+ ${b[start + j]}`);
      j++;
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
  const check = args.includes('--check');
  const dirs = args.filter((arg) => arg !== '--check').map((dir) => resolve(dir));
  const selected = dirs.length > 0 ? dirs : packageDirs();
  for (const dir of selected) {
    if (newestMtime(join(dir, 'src')) > newestMtime(join(dir, 'dist'))) {
      console.warn(
        `api report: ${relative(root, dir) || dir} has sources newer than its dist/; the report ` +
          "reads dist/ (build first: turbo run build --filter='./packages/*')",
      );
    }
  }
  const reports = buildReports(selected);
  const shown = (path) => relative(root, path).split(sep).join('/');
  if (!check) {
    for (const [path, text] of reports) writeFileSync(path, text);
    console.log(`api report: wrote ${[...reports.keys()].map(shown).join(', ')}`);
    return;
  }
  const stale = staleReports(reports);
  for (const { path, diff } of stale) {
    console.error(`\n${shown(path)} (- checked in, + the code now):`);
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
