// The code's shape, checked over the working tree (see codeShape.mjs): part of
// `pnpm test:packaging` (`node --test scripts/`).
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { after, describe, it } from 'node:test';
import {
  filesOf,
  importCycles,
  internalUses,
  longFiles,
  longFunctions,
  MAX_FILE_LINES,
  MAX_FUNCTION_LINES,
  root,
} from './codeShape.mjs';

const packageSources = filesOf('packages/*/src/**').filter((file) => /\.tsx?$/.test(file));
const show = (items) => items.map((item) => JSON.stringify(item)).join('\n');

describe('the code', () => {
  it(`keeps every file under packages/*/src within ${MAX_FILE_LINES} lines`, () => {
    assert.ok(packageSources.length > 100);
    const long = longFiles(packageSources);
    assert.deepEqual(long, [], show(long));
  });

  it(`keeps every function outside tests within ${MAX_FUNCTION_LINES} lines`, () => {
    const long = longFunctions(packageSources);
    assert.deepEqual(long, [], show(long));
  });

  it('has no import cycle in packages/core/src or apps/checkout/src', () => {
    const core = importCycles(filesOf('packages/core/src/**.ts'));
    const app = importCycles(
      filesOf('apps/checkout/src/**.ts', 'apps/checkout/src/**.tsx'),
      'apps/checkout/src',
    );
    assert.deepEqual([...core, ...app], []);
  });

  it("uses only its dependencies' public API (one deliberate use, marked internal-api)", () => {
    const code = packageSources.filter((file) => !/\.test\.tsx?$/.test(file));
    const uses = internalUses(code);
    assert.deepEqual(uses, [], show(uses));
  });
});

describe('the checks themselves', () => {
  const scratch = mkdtempSync(join(tmpdir(), 'idem-shape-'));
  after(() => rmSync(scratch, { recursive: true, force: true }));
  const write = (name, text) => {
    writeFileSync(join(scratch, name), text);
    return relative(root, join(scratch, name));
  };

  it('find a long function, an import cycle and each kind of internal use', () => {
    const body = Array.from({ length: MAX_FUNCTION_LINES + 1 }, (_, i) => `  const v${i} = ${i};`);
    const long = write('long.ts', `export function long() {\n${body.join('\n')}\n}\n`);
    assert.equal(longFunctions([long]).length, 1);
    assert.equal(longFiles([long]).length, 0);
    const a = write('a.ts', "import { b } from './b.js';\nexport const a = b;\n");
    const b = write('b.ts', "import { a } from './a.js';\nexport const b = a;\n");
    assert.deepEqual(importCycles([a, b]), [[a, b].sort()]);
    const uses = write(
      'uses.ts',
      [
        'const fields = found._.selectedFields;',
        'const strings = pieces as unknown as TemplateStringsArray;',
        'const inputs = procedure._def.inputs;',
        'const allowed = procedure._def; // internal-api: the reason',
        '// a comment that mentions _def',
      ].join('\n'),
    );
    assert.deepEqual(
      internalUses([uses]).map((use) => use.line),
      [1, 2, 3],
    );
  });
});
