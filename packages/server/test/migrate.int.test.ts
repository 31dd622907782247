import { PGlite } from '@electric-sql/pglite';
import { sql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/pglite';
import { afterEach, describe, expect, it } from 'vitest';
import { migrate, migrateWith } from '../src/postgres/migrate.js';
import { migrations } from '../src/postgres/migrations.generated.js';
import type { PgDatabaseLike } from '../src/postgres/PgDatabaseLike.js';
import { connect, createScratchDatabase, rows, type ScratchDatabase } from './harness.js';

const tags = migrations.map((migration) => migration.tag);

const appliedTags = async (db: PgDatabaseLike) =>
  (
    await rows<{ tag: string }>(db, sql`select tag from idem_migrations order by applied_at, tag`)
  ).map((row) => row.tag);

const tableExists = async (db: PgDatabaseLike, name: string) => {
  const [row] = await rows<{ present: boolean }>(
    db,
    sql`select to_regclass(${name}) is not null as present`,
  );
  return row?.present;
};

/** Runs `test` on a new PGlite database, nothing migrated yet; closed after. */
async function onNewPglite(test: (db: PgDatabaseLike) => Promise<void>): Promise<void> {
  const client = new PGlite();
  try {
    await test(drizzle(client));
  } finally {
    await client.close();
  }
}

describe('migrate on PGlite', () => {
  it('creates the tables once and is a no-op after that', () =>
    onNewPglite(async (db) => {
      expect(await migrate(db)).toEqual({ applied: tags });
      expect(await migrate(db)).toEqual({ applied: [] });
      expect(await appliedTags(db)).toEqual(tags);
      expect(await tableExists(db, 'idem_keys')).toBe(true);
    }));

  it('applies only the missing migrations, in order', () =>
    onNewPglite(async (db) => {
      await migrate(db);
      const later = [
        { tag: '9998_first', hash: 'h1', statements: ['create table later_a (id int)'] },
        {
          tag: '9999_second',
          hash: 'h2',
          statements: ['create table later_b (a_id int)', 'insert into later_b values (1)'],
        },
      ];
      expect(await migrateWith(db, [...migrations, ...later])).toEqual({
        applied: ['9998_first', '9999_second'],
      });
      expect(await migrateWith(db, [...migrations, ...later])).toEqual({ applied: [] });
    }));

  it('rolls everything back when a migration fails', () =>
    onNewPglite(async (db) => {
      const broken = { tag: '9999_broken', hash: 'hb', statements: ['select * from nowhere'] };
      await expect(migrateWith(db, [...migrations, broken])).rejects.toThrow();
      expect(await tableExists(db, 'idem_keys')).toBe(false);
      expect(await tableExists(db, 'idem_migrations')).toBe(false);
      expect(await migrate(db)).toEqual({ applied: tags });
    }));
});

describe('migrate on Postgres', () => {
  let scratch: ScratchDatabase | undefined;
  afterEach(async () => {
    await scratch?.drop();
    scratch = undefined;
  });

  it('lets 8 app servers start at once: all succeed, each migration is applied once', async () => {
    scratch = await createScratchDatabase();
    const { url } = scratch;
    const first = connect(url, 1);
    const servers = [first, ...Array.from({ length: 7 }, () => connect(url, 1))];
    try {
      const results = await Promise.all(servers.map((db) => migrate(db)));
      expect(results.flatMap((result) => result.applied)).toEqual(tags);
      expect(results.filter((result) => result.applied.length > 0)).toHaveLength(1);
      expect(await appliedTags(first)).toEqual(tags);

      const again = await Promise.all(servers.map((db) => migrate(db)));
      expect(again.every((result) => result.applied.length === 0)).toBe(true);
    } finally {
      await Promise.all(servers.map((db) => db.$client.end()));
    }
  });
});
