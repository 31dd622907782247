import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  migrationsFolder,
  packageDir,
  readMigrationsFolder,
} from '../scripts/generateMigrations.js';
import { migrations } from '../src/postgres/migrations.generated.js';

const listFiles = (folder: string): string[] =>
  readdirSync(folder, { recursive: true, encoding: 'utf8' }).sort();

describe('bundled migrations', () => {
  it('match the drizzle/ folder (run `pnpm --filter @idem/server db:generate`)', () => {
    expect(migrations).toEqual(readMigrationsFolder(migrationsFolder));
  });

  it('cover every change to schema.ts (run `pnpm --filter @idem/server db:generate`)', () => {
    const scratch = mkdtempSync(join(tmpdir(), 'idem-drizzle-'));
    try {
      cpSync(migrationsFolder, scratch, { recursive: true });
      const generate = spawnSync(
        process.execPath,
        [
          join(packageDir, 'node_modules/drizzle-kit/bin.cjs'),
          'generate',
          '--dialect=postgresql',
          '--schema=./src/postgres/schema.ts',
          // drizzle-kit prefixes "./" to this path, so it must be relative.
          `--out=${relative(packageDir, scratch)}`,
        ],
        { cwd: packageDir, encoding: 'utf8' },
      );
      // drizzle-kit exits 0 on some errors, so its words are the verdict.
      expect(`${generate.stdout}${generate.stderr}`).toContain('No schema changes');
      expect(listFiles(scratch)).toEqual(listFiles(migrationsFolder));
    } finally {
      rmSync(scratch, { recursive: true, force: true });
    }
  });
});
