// Tests of the packaging checks themselves, on small packages made in a temporary folder:
// a changed export fails the API report check, a broken package fails checkPackaging.
// Run with `node --test scripts/` (part of `pnpm test:packaging`).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { buildReports, diffLines, REPORT_FILE, staleReports } from './apiReport.mjs';

const run = promisify(execFile);
const scratch = mkdtempSync(join(tmpdir(), 'idem-scripts-test-'));
after(() => rmSync(scratch, { recursive: true, force: true }));

/** A package `name` with the given files, in a folder of its own. */
function makePackage(name, manifest, files) {
  const dir = join(scratch, name);
  for (const [path, text] of Object.entries({
    'package.json': JSON.stringify({ name, version: '1.0.0', type: 'module', ...manifest }),
    ...files,
  })) {
    mkdirSync(join(dir, path, '..'), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  return dir;
}

describe('api report', () => {
  const manifest = {
    exports: {
      '.': { '@idem/source': './src/index.ts' },
      './extra': { '@idem/source': './src/extra.ts' },
    },
  };
  const extra = 'export class Widget {}\nexport type WidgetId = string;\n';

  it('lists each entry with its names sorted and their kinds', () => {
    const dir = makePackage('report-kinds', manifest, {
      'src/index.ts': [
        'export function start(): void {}',
        'export const LIMIT = 3;',
        'export interface Options { a: number }',
        "export { Widget as Gadget } from './extra.js';",
      ].join('\n'),
      'src/extra.ts': extra,
    });
    const report = buildReports([dir]).get(join(dir, REPORT_FILE));
    assert.match(
      report,
      /## report-kinds \(4\)\n\n- `Gadget`: class\n- `LIMIT`: const\n- `Options`: interface\n- `start`: function\n/,
    );
    assert.match(report, /## report-kinds\/extra \(2\)\n\n- `Widget`: class\n- `WidgetId`: type\n/);
  });

  it('catches an export that changed kind, appeared or disappeared', () => {
    const dir = makePackage('report-change', manifest, {
      'src/index.ts': 'export function start(): void {}\nexport const LIMIT = 3;\n',
      'src/extra.ts': extra,
    });
    for (const [path, text] of buildReports([dir])) writeFileSync(path, text);
    assert.deepEqual(staleReports(buildReports([dir])), []);

    writeFileSync(
      join(dir, 'src/index.ts'),
      'export const start = (): void => {};\nexport const STOP = 1;\n',
    );
    const stale = staleReports(buildReports([dir]));
    assert.equal(stale.length, 1);
    assert.equal(stale[0].path, join(dir, REPORT_FILE));
    for (const line of [
      '- - `LIMIT`: const',
      '+ - `STOP`: const',
      '- - `start`: function',
      '+ - `start`: const',
    ]) {
      assert.ok(stale[0].diff.split('\n').includes(line), `${line} in:\n${stale[0].diff}`);
    }
  });

  it('fails on an export it cannot resolve', () => {
    const dir = makePackage('report-broken', manifest, {
      'src/index.ts': "export { gone } from './missing.js';\n",
      'src/extra.ts': extra,
    });
    assert.throws(() => buildReports([dir]), /cannot resolve the export `gone`/);
  });

  it('diffs lines, naming the section of each change', () => {
    const before = '# t\n## a (1)\n- x\n## b (1)\n- y\n';
    const after = '# t\n## a (1)\n- x\n## b (1)\n- z\n';
    assert.equal(diffLines(before, after), '  ## b (1)\n+ - z\n- - y');
  });
});

describe('checkPackaging', () => {
  const script = fileURLToPath(new URL('checkPackaging.mjs', import.meta.url));

  it('fails on what publint or attw finds, and on a shipped test file', async () => {
    const entry = { types: './dist/index.d.ts', import: './dist/index.js' };
    // publint: `types` names a file the package does not ship.
    const missingTypes = makePackage(
      'packaging-missing-types',
      { license: 'MIT', files: ['dist'], exports: { '.': entry } },
      { 'dist/index.js': 'export const one = 1;\n', 'dist/index.test.js': '' },
    );
    // attw: an extensionless relative import in ESM types does not resolve under node16.
    const extensionless = makePackage(
      'packaging-extensionless',
      { license: 'MIT', files: ['dist'], exports: { '.': entry } },
      {
        'dist/index.js': "export * from './one.js';\n",
        'dist/index.d.ts': "export * from './one';\n",
        'dist/one.js': 'export const one = 1;\n',
        'dist/one.d.ts': 'export declare const one = 1;\n',
      },
    );
    const failure = await run('node', [script, missingTypes, extensionless]).then(
      () => assert.fail('checkPackaging passed broken packages'),
      (error) => error,
    );
    assert.equal(failure.code, 1);
    assert.match(failure.stderr, /packaging-missing-types has 3 problem/);
    assert.match(failure.stderr, /publint error: .*dist\/index\.d\.ts/);
    assert.match(failure.stderr, /attw: the package ships no type declarations/);
    assert.match(failure.stderr, /ships a test file: package\/dist\/index\.test\.js/);
    assert.match(failure.stderr, /packaging-extensionless has 1 problem/);
    assert.match(failure.stderr, /attw \(--profile esm-only\):.*node16 \(from ESM\)/s);
  });
});
