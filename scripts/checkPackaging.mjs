// Checks every package under packages/ the way the ecosystem checks a published package:
// publint (package.json fields against the files that ship) and are-the-types-wrong (how
// TypeScript resolves each entry's types). Run after `turbo run build --filter='./packages/*'`;
// exits non-zero on any finding, printing it. `node scripts/checkPackaging.mjs [dir…]` checks
// the given package directories instead of every one under packages/.
//
// Each package is packed once with `pnpm pack`, the tarball `pnpm publish` would upload
// (`workspace:*` already replaced by a version), and both tools read that tarball.
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { publint } from 'publint';
import { formatMessage } from 'publint/utils';

const run = promisify(execFile);
const root = fileURLToPath(new URL('..', import.meta.url));
const attw = join(root, 'node_modules/.bin/attw');

/**
 * The packages are ESM only ("type": "module", only `import` conditions, Node >= 20), so
 * attw's `esm-only` profile: it leaves out the node10 resolution (no `exports` support, which
 * we do not serve) and require() from CommonJS under node16 (which an ESM-only package answers
 * with "dynamic import only" by design). Every ESM resolution (node16 from ESM, bundler) must
 * be clean; the default `strict` profile would fail on those two by construction.
 */
const ATTW_PROFILE = 'esm-only';

/** A test file in a tarball is weight every install downloads and nobody runs. */
const TEST_FILE = /\.test\.[cm]?[jt]sx?$/;

async function checkPackage(dir, packDir) {
  const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
  const { stdout } = await run('pnpm', ['pack', '--json', '--pack-destination', packDir], {
    cwd: dir,
  });
  const tarball = JSON.parse(stdout).filename;
  const problems = [];

  // With a tarball, publint reads everything from it (its root is the package directory).
  const { messages, pkg } = await publint({
    pack: { tarball: new Uint8Array(readFileSync(tarball)).buffer },
    level: 'suggestion',
    strict: true,
  });
  for (const message of messages) {
    problems.push(`publint ${message.type}: ${formatMessage(message, pkg) ?? message.code}`);
  }

  // attw exits non-zero on a problem its profile counts, and passes a package with no types
  // at all: its JSON says which.
  const attwArgs = [tarball, '--profile', ATTW_PROFILE];
  const analysis = await run(attw, [...attwArgs, '--format', 'json'], { cwd: root }).then(
    ({ stdout }) => JSON.parse(stdout).analysis,
    async () => {
      const shown = await run(attw, [...attwArgs, '--format', 'ascii', '--no-color'], {
        cwd: root,
      }).catch((error) => error);
      problems.push(`attw (--profile ${ATTW_PROFILE}):\n${shown.stdout || shown.message}`);
      return null;
    },
  );
  if (analysis && analysis.types === false) {
    problems.push('attw: the package ships no type declarations');
  }

  const { stdout: listing } = await run('tar', ['tzf', tarball]);
  const files = listing.split('\n').filter(Boolean);
  for (const file of files.filter((name) => TEST_FILE.test(name))) {
    problems.push(`ships a test file: ${file} (exclude it in "files")`);
  }
  return { name: manifest.name, files: files.length, problems };
}

// The package directories to check: the arguments, or every one under packages/.
const packagesDir = join(root, 'packages');
const dirs =
  process.argv.length > 2
    ? process.argv.slice(2).map((dir) => resolve(dir))
    : readdirSync(packagesDir, { withFileTypes: true })
        .filter((entry) => entry.isDirectory())
        .map((entry) => join(packagesDir, entry.name));
const packDir = mkdtempSync(join(tmpdir(), 'idem-pack-'));
let failed = 0;
try {
  const results = await Promise.all(dirs.map((dir) => checkPackage(dir, packDir)));
  for (const { name, files, problems } of results) {
    if (problems.length === 0) {
      console.log(
        `packaging: ${name} clean (publint, attw --profile ${ATTW_PROFILE}; ${files} files)`,
      );
    } else {
      failed++;
      console.error(`packaging: ${name} has ${problems.length} problem(s):`);
      for (const problem of problems) console.error(`  ${problem.replaceAll('\n', '\n  ')}`);
    }
  }
} finally {
  rmSync(packDir, { recursive: true, force: true });
}
if (failed > 0) process.exit(1);
