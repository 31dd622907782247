import { execFile } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { installProject, outsideEnv, root } from './outsideInstall.js';

/**
 * Every `/testing` entry loads in an app that installed the packages and their required
 * peers and nothing else: no test runner, no optional peer, no devDependency. Examples,
 * benchmarks and tools import these helpers outside any test, and the workspace (where
 * vitest is always installed) would hide an entry that needs one.
 */
const run = promisify(execFile);
const INSTALL_TIMEOUT_MS = 300_000;
const tarballs = inject('tarballs');
const dir = join(inject('outsideDir'), 'testing-entries');

interface Manifest {
  name: string;
  exports: Record<string, unknown>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
}
const packages = readdirSync(join(root, 'packages')).map((name) => ({
  dir: join(root, 'packages', name),
  manifest: JSON.parse(
    readFileSync(join(root, 'packages', name, 'package.json'), 'utf8'),
  ) as Manifest,
}));
const requiredPeers = packages.flatMap(({ manifest }) =>
  Object.keys(manifest.peerDependencies ?? {}).filter(
    (peer) => !manifest.peerDependenciesMeta?.[peer]?.optional,
  ),
);
const testingEntries = packages.flatMap(({ dir: packageDir, manifest }) =>
  Object.keys(manifest.exports)
    .filter((subpath) => subpath.endsWith('/testing'))
    .map((subpath) => ({ packageDir, specifier: `${manifest.name}${subpath.slice(1)}` })),
);

/** The names an entry exports at run time (not its types), as its API report lists them. */
function reportedValues(packageDir: string, specifier: string): string[] {
  const report = readFileSync(join(packageDir, 'api-report.md'), 'utf8');
  const section = report.split(/^## /m).find((text) => text.startsWith(`${specifier} (`));
  if (!section) throw new Error(`${specifier} has no section in its api-report.md`);
  return [...section.matchAll(/^### `(\w+)`: (.+)$/gm)]
    .flatMap(([, name, kind]) =>
      name !== undefined && kind !== undefined && /\b(function|const|let|class|enum)\b/.test(kind)
        ? [name]
        : [],
    )
    .sort();
}

/** Imports `specifier` from the project with plain Node: its export names, or the error. */
async function importFromProject(specifier: string) {
  const script = [
    `const entry = await import(${JSON.stringify(specifier)});`,
    'console.log(JSON.stringify(Object.keys(entry).sort()));',
  ].join('\n');
  return run(process.execPath, ['--input-type=module', '--eval', script], {
    cwd: dir,
    env: outsideEnv(),
  }).then(
    ({ stdout }) => ({ names: JSON.parse(stdout) as string[], error: '' }),
    (error: { stderr: string }) => ({ names: [], error: error.stderr }),
  );
}

beforeAll(async () => {
  await installProject(dir, [...Object.keys(tarballs), ...requiredPeers], tarballs);
}, INSTALL_TIMEOUT_MS);

describe('the /testing entries, installed without a test runner', () => {
  it('installs a project where vitest does not resolve: the workspace is out of reach', async () => {
    expect(testingEntries.length).toBeGreaterThanOrEqual(4);
    const { error } = await importFromProject('vitest');
    expect(error).toMatch(/ERR_MODULE_NOT_FOUND/);
  });

  for (const { packageDir, specifier } of testingEntries) {
    it(`loads ${specifier}, with every value its API report lists`, async () => {
      const { names, error } = await importFromProject(specifier);
      expect(error).toBe('');
      expect(names).toEqual(reportedValues(packageDir, specifier));
    });
  }

  it('keeps the store conformance suite, which needs vitest, in its own entry', async () => {
    const { error } = await importFromProject('@idem/core/testing/contract');
    expect(error).toMatch(/ERR_MODULE_NOT_FOUND.*'vitest'/);
  });
});
