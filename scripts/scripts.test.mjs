// Tests of the packaging checks themselves, on small packages made in a temporary folder:
// a changed export or a changed option type fails the API report check, a broken package
// fails checkPackaging.
// Run with `node --test scripts/` (part of `pnpm test:packaging`).
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
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
  const script = fileURLToPath(new URL('apiReport.mjs', import.meta.url));
  const manifest = {
    exports: {
      '.': { types: './dist/index.d.ts', import: './dist/index.js' },
      './extra': { types: './dist/extra.d.ts', import: './dist/extra.js' },
    },
  };
  const extra = [
    'export declare class Widget {',
    '    #private;',
    '    private secret;',
    '    readonly id: WidgetId;',
    '    constructor(id: WidgetId);',
    '    /** Turns it. */',
    '    turn(degrees: number): void;',
    '}',
    'export type WidgetId = string;',
  ].join('\n');
  /** The lines of `report` from `heading` to the end of its code block. */
  const sectionOf = (report, heading) => {
    const start = report.indexOf(`${heading}\n`);
    assert.notEqual(start, -1, `${heading} in:\n${report}`);
    return report.slice(start, report.indexOf('```\n', report.indexOf('```ts', start)) + 3);
  };
  /**
   * A package `name` with the manifest above: `dist/index.d.ts` holds `index` (text, or its
   * lines), `dist/extra.d.ts` the declarations above, and any other `files` as given.
   */
  const reportPackage = (name, index, files = {}) =>
    makePackage(name, manifest, {
      'dist/index.d.ts': typeof index === 'string' ? index : index.join('\n'),
      'dist/extra.d.ts': extra,
      ...files,
    });

  it('gives each export its declaration: signatures, members, types', () => {
    const dir = reportPackage('report-kinds', [
      '/** Starts. */',
      'export declare function start(): void;',
      'export declare function start(options: Options): void;',
      'export declare const LIMIT = 3;',
      'export declare const table: {',
      '    name: "t";',
      '};',
      'export interface Options {',
      '    /** How long. */',
      '    a: number;',
      '    b?:   string |',
      '        undefined;',
      '    c: [x: number, y: number];',
      '}',
      "export type Mode = 'lease' | 'transaction';",
      "export { Widget as Gadget } from './extra.js';",
    ]);
    const report = buildReports([dir]).get(join(dir, REPORT_FILE));
    assert.deepEqual(
      report.split('\n').filter((line) => line.startsWith('#')),
      [
        '# report-kinds: API report',
        '## report-kinds (6)',
        '### `Gadget`: class',
        '### `LIMIT`: const',
        '### `Mode`: type',
        '### `Options`: interface',
        '### `start`: function',
        '### `table`: const',
        '## report-kinds/extra (2)',
        '### `Widget`: class',
        '### `WidgetId`: type',
      ],
    );
    assert.equal(
      sectionOf(report, '### `start`: function'),
      [
        '### `start`: function',
        '',
        '```ts',
        'function start(): void;',
        'function start(options: Options): void;',
        '```',
      ].join('\n'),
    );
    assert.match(
      sectionOf(report, '### `Options`: interface'),
      /```ts\ninterface Options \{\n {2}a: number;\n {2}b\?: string \| undefined;\n {2}c: \[x: number, y: number\];\n\}\n```/,
    );
    assert.match(report, /```ts\ntype Mode = 'lease' \| 'transaction';\n```/);
    assert.match(report, /```ts\nconst LIMIT = 3;\n```/);
    assert.match(report, /```ts\nconst table: \{ name: "t"; \};\n```/);
    // A class's public members: no private ones, no comments.
    assert.match(
      sectionOf(report, '### `Widget`: class'),
      /```ts\nclass Widget \{\n {2}readonly id: WidgetId;\n {2}constructor\(id: WidgetId\);\n {2}turn\(degrees: number\): void;\n\}\n```/,
    );
    assert.ok(!report.includes(scratch), 'no absolute paths in the report');
  });

  it('catches an export that changed kind, appeared or disappeared', () => {
    const dir = reportPackage(
      'report-change',
      'export declare function start(): void;\nexport declare const LIMIT = 3;\n',
    );
    for (const [path, text] of buildReports([dir])) writeFileSync(path, text);
    assert.deepEqual(staleReports(buildReports([dir])), []);

    writeFileSync(
      join(dir, 'dist/index.d.ts'),
      'export declare const start: () => void;\nexport declare const STOP = 1;\n',
    );
    const stale = staleReports(buildReports([dir]));
    assert.equal(stale.length, 1);
    assert.equal(stale[0].path, join(dir, REPORT_FILE));
    for (const line of [
      '- ### `LIMIT`: const',
      '+ ### `STOP`: const',
      '- ### `start`: function',
      '+ ### `start`: const',
      '- function start(): void;',
      '+ const start: () => void;',
    ]) {
      assert.ok(stale[0].diff.split('\n').includes(line), `${line} in:\n${stale[0].diff}`);
    }
  });

  // An option that changes type (a `number` that becomes `number | string`) keeps its name
  // and its kind: only the signature tells, including when it is inherited from an interface
  // the package does not export, or from another package's.
  describe('catches an option that changed type', () => {
    const base = makePackage(
      'report-base',
      { exports: { '.': { types: './dist/index.d.ts' } } },
      {
        'dist/index.d.ts': [
          'export interface SharedOptions {',
          '    leaseMs?: number;',
          '    retryAfterMs?: number;',
          '}',
        ].join('\n'),
      },
    );
    const app = reportPackage(
      'report-app',
      [
        "import type { SharedOptions } from 'report-base';",
        "import type { KeyedOptions } from './KeyedOptions.js';",
        "export interface HandlerOptions extends Omit<KeyedOptions, 'store'> {",
        '    maxBodyBytes?: number;',
        '}',
        'export declare function handler(options: HandlerOptions): void;',
        'export declare function shared(options: SharedOptions): void;',
      ],
      {
        'dist/KeyedOptions.d.ts': [
          "import type { SharedOptions } from 'report-base';",
          'export interface KeyedOptions extends SharedOptions {',
          '    store: unknown;',
          '    waitMs?: number;',
          '}',
        ].join('\n'),
      },
    );
    // The app depends on the base package as a workspace does: a link in node_modules.
    mkdirSync(join(app, 'node_modules'));
    symlinkSync(base, join(app, 'node_modules/report-base'), 'dir');
    const packages = [base, app];
    const write = () => {
      for (const [path, text] of buildReports(packages)) writeFileSync(path, text);
    };
    /** Runs `fn` while `file` has `from` replaced by `to`, then puts the file back. */
    const editing = async (file, [from, to], fn) => {
      const before = readFileSync(file, 'utf8');
      writeFileSync(file, before.replace(from, to));
      try {
        return await fn();
      } finally {
        writeFileSync(file, before);
      }
    };
    /**
     * The diffs of the reports that go stale, from reports written afresh, while `file` is
     * edited (`[from, to]`); checks that they are the reports of `stalePackages`, in order.
     */
    const diffsWhile = async (file, edit, stalePackages) => {
      write();
      const stale = await editing(file, edit, () => staleReports(buildReports(packages)));
      assert.deepEqual(
        stale.map(({ path }) => path),
        stalePackages.map((dir) => join(dir, REPORT_FILE)),
      );
      return stale.map(({ diff }) => diff);
    };

    it('lists inherited members and the internal declarations the exports use', () => {
      write();
      const report = readFileSync(join(app, REPORT_FILE), 'utf8');
      assert.equal(
        sectionOf(report, '### `HandlerOptions`: interface'),
        [
          '### `HandlerOptions`: interface',
          '',
          '```ts',
          "interface HandlerOptions extends Omit<KeyedOptions, 'store'> {",
          '  maxBodyBytes?: number;',
          '  // inherited from KeyedOptions:',
          '  waitMs?: number;',
          '  // inherited from SharedOptions (report-base):',
          '  leaseMs?: number;',
          '  retryAfterMs?: number;',
          '}',
          '```',
        ].join('\n'),
      );
      assert.match(report, /## Referenced, not exported \(1\)\n/);
      assert.match(
        report,
        /### `KeyedOptions`: interface\n\n```ts\ninterface KeyedOptions extends/,
      );
      assert.deepEqual(staleReports(buildReports(packages)), []);
    });

    it('in an inherited member of an internal interface', async () => {
      const [diff] = await diffsWhile(
        join(app, 'dist/KeyedOptions.d.ts'),
        ['waitMs?: number;', 'waitMs?: number | string;'],
        [app],
      );
      assert.equal(
        diff,
        [
          '  ## report-app (3)',
          '  ### `HandlerOptions`: interface',
          '-   waitMs?: number;',
          '+   waitMs?: number | string;',
          '  ## Referenced, not exported (1)',
          '  ### `KeyedOptions`: interface',
          '-   waitMs?: number;',
          '+   waitMs?: number | string;',
        ].join('\n'),
      );
    });

    it("in another package's base interface, in both packages' reports", async () => {
      const diffs = await diffsWhile(
        join(base, 'dist/index.d.ts'),
        ['retryAfterMs?: number;', 'retryAfterMs?: string;'],
        [base, app],
      );
      for (const diff of diffs) {
        assert.ok(diff.includes('\n-   retryAfterMs?: number;\n+   retryAfterMs?: string;'), diff);
      }
      assert.match(diffs[1], /^ {2}## report-app \(3\)\n {2}### `HandlerOptions`: interface\n/);
    });

    it('fails `--check` with a diff naming the option, until the report is written again', async () => {
      write();
      const edit = ['maxBodyBytes?: number;', 'maxBodyBytes?: bigint;'];
      await editing(join(app, 'dist/index.d.ts'), edit, async () => {
        const failure = await run('node', [script, '--check', base, app]).then(
          () => assert.fail('--check passed a changed option type'),
          (error) => error,
        );
        assert.equal(failure.code, 1);
        assert.match(
          failure.stderr,
          /report-app\/api-report\.md \(- checked in, \+ the code now\):\n {2}## report-app \(3\)\n {2}### `HandlerOptions`: interface\n- {3}maxBodyBytes\?: number;\n\+ {3}maxBodyBytes\?: bigint;\n/,
        );
        assert.match(failure.stderr, /run `pnpm api:report` and commit the report/);

        // Written again, the reports match (the CLI's pass is the same staleReports).
        write();
        assert.deepEqual(staleReports(buildReports(packages)), []);
      });
    });
  });

  it('names the file of internal declarations that share a name', () => {
    const dir = reportPackage(
      'report-internal',
      [
        "import type { Options as A } from './a.js';",
        "import type { Options as B } from './b.js';",
        'export declare function one(options: A): void;',
        'export declare function two(options: B): void;',
      ],
      {
        'dist/a.d.ts': 'export interface Options {\n    a: number;\n}\n',
        'dist/b.d.ts':
          'export interface Options {\n    b: Shared;\n}\ninterface Shared {\n    c: 1;\n}\n',
      },
    );
    const report = buildReports([dir]).get(join(dir, REPORT_FILE));
    assert.deepEqual(
      report
        .slice(report.indexOf('## Referenced'))
        .split('\n')
        .filter((l) => l.startsWith('#')),
      [
        '## Referenced, not exported (3)',
        '### `Options`: interface (dist/a.d.ts)',
        '### `Options`: interface (dist/b.d.ts)',
        '### `Shared`: interface',
      ],
    );
  });

  it('writes what `biome format` (`pnpm format`) leaves as it is', () => {
    const dir = reportPackage('report-format', [
      'export declare function long(first: { a: string; b: number }, second: Record<string, readonly [x: number, y: number]>): Promise<void>;',
      "export type Union = { status: 'claimed'; takeover: boolean } | { status: 'replay'; record: string };",
    ]);
    const report = buildReports([dir]).get(join(dir, REPORT_FILE));
    assert.match(report, /\n\s+second: Record<string, readonly \[x: number, y: number\]>,\n/);
    // As `pnpm format` runs it: from the repository's root, with its biome.json.
    const biome = fileURLToPath(new URL('../node_modules/.bin/biome', import.meta.url));
    const again = spawnSync(biome, ['format', '--stdin-file-path=api-report.md'], {
      cwd: fileURLToPath(new URL('..', import.meta.url)),
      input: report,
      encoding: 'utf8',
    });
    assert.equal(again.status, 0, again.stderr);
    assert.equal(again.stdout, report);
  });

  it('fails on an export it cannot resolve', () => {
    const dir = reportPackage('report-broken', "export { gone } from './missing.js';\n");
    assert.throws(() => buildReports([dir]), /cannot resolve the export `gone`/);
  });

  it('fails when the declarations are not built', () => {
    const dir = makePackage('report-unbuilt', manifest, { 'dist/extra.d.ts': extra });
    assert.throws(
      () => buildReports([dir]),
      /report-unbuilt: \.\/dist\/index\.d\.ts not found; build the packages first/,
    );
  });

  it('diffs lines, changes under the entry and the name they fall in', () => {
    const before = '# t\n## a (1)\n### x\nx1\n## b (2)\n### y\ny1\ny2\n### z\nz1\n';
    const after = '# t\n## a (1)\n### x\nx1\n## b (2)\n### y\ny1\ny3\n### z\nz2\n';
    assert.equal(diffLines(before, after), '  ## b (2)\n  ### y\n- y2\n+ y3\n  ### z\n- z1\n+ z2');
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
