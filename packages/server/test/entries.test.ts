import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const packageRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const packageJson = JSON.parse(readFileSync(resolve(packageRoot, 'package.json'), 'utf8')) as {
  exports: Record<string, { '@idem/source': string }>;
};

/**
 * Every source file an entry (a subpath of the package's exports, e.g. `./outbox`) loads,
 * following relative imports, type-only ones included, since the entry's `.d.ts` refers to
 * them too; and every package it imports.
 */
function importGraph(subpath: string): { files: string[]; packages: Set<string> } {
  const entry = packageJson.exports[subpath];
  if (!entry) throw new Error(`package.json exports no ${subpath}`);
  const files: string[] = [];
  const packages = new Set<string>();
  const pending = [resolve(packageRoot, entry['@idem/source'])];
  const seen = new Set<string>();
  for (let file = pending.pop(); file !== undefined; file = pending.pop()) {
    if (seen.has(file)) continue;
    seen.add(file);
    files.push(file);
    const { importedFiles } = ts.preProcessFile(readFileSync(file, 'utf8'), true, true);
    for (const { fileName: specifier } of importedFiles) {
      if (specifier.startsWith('.')) {
        pending.push(resolve(dirname(file), specifier.replace(/\.js$/, '.ts')));
      } else {
        packages.add(specifier);
      }
    }
  }
  return { files, packages };
}

describe('package entries', () => {
  it('@idem/server/outbox imports nothing from tRPC, so an app with only the outbox needs no @trpc/server', () => {
    const { files, packages } = importGraph('./outbox');
    expect(files.length).toBeGreaterThan(10);
    expect([...packages].filter((name) => name.startsWith('@trpc/'))).toEqual([]);
    expect(packages).toContain('drizzle-orm');
  });

  it('@idem/server/postgres imports nothing from tRPC, so an outbox-only app can migrate without @trpc/server', () => {
    const { files, packages } = importGraph('./postgres');
    expect(files.length).toBeGreaterThan(5);
    expect([...packages].filter((name) => name.startsWith('@trpc/'))).toEqual([]);
    expect(packages).toContain('drizzle-orm');
  });

  it('@idem/server/nats imports nothing from tRPC', () => {
    const { packages } = importGraph('./nats');
    expect([...packages].filter((name) => name.startsWith('@trpc/'))).toEqual([]);
  });

  it('@idem/server/next imports neither Next.js, React nor tRPC, so any Next.js version (or none, in tests) can load it', () => {
    const { packages } = importGraph('./next');
    expect(
      [...packages].filter((name) => /^(next|react|react-dom|@trpc\/.*)(\/|$)/.test(name)),
    ).toEqual([]);
  });

  it('the main entry holds the tRPC middleware, and neither the outbox nor the Postgres base', async () => {
    const main = await import('../src/index.js');
    const outbox = await import('../src/outbox/index.js');
    const postgres = await import('../src/postgres/index.js');
    expect(typeof main.idempotent).toBe('function');
    expect(Object.keys(outbox)).toContain('createRelay');
    expect(Object.keys(postgres)).toEqual(
      expect.arrayContaining(['migrate', 'drizzleStore', 'createSweeper', 'sweepExpired']),
    );
    expect(Object.keys(main).filter((name) => name in outbox || name in postgres)).toEqual([]);
  });

  it('each name is exported from one entry only', async () => {
    const owners = new Map<string, string[]>();
    for (const [subpath, entry] of Object.entries(packageJson.exports)) {
      const module = (await import(resolve(packageRoot, entry['@idem/source']))) as object;
      for (const name of Object.keys(module))
        owners.set(name, [...(owners.get(name) ?? []), subpath]);
    }
    expect([...owners].filter(([, subpaths]) => subpaths.length > 1)).toEqual([]);
  });

  it('no entry re-exports what @idem/core exports', async () => {
    const core = await import('@idem/core');
    for (const [subpath, entry] of Object.entries(packageJson.exports)) {
      const module = (await import(resolve(packageRoot, entry['@idem/source']))) as object;
      expect({ subpath, shared: Object.keys(module).filter((name) => name in core) }).toEqual({
        subpath,
        shared: [],
      });
    }
  });
});
