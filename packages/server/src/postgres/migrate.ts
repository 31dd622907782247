import { sql } from 'drizzle-orm';
import { pgTable, text, timestamp } from 'drizzle-orm/pg-core';
import { transactionOnItsConnection } from './driverEnd.js';
import { type BundledMigration, migrations as bundledMigrations } from './migrations.generated.js';
import { hearCheckedOutErrors } from './nodePostgresClient.js';
import type { PgDatabaseLike } from './PgDatabaseLike.js';

/**
 * The advisory lock that serialises `migrate()` across processes: "idem" in ASCII.
 * Transaction-scoped, so a crashed migrator can never leave it held.
 */
export const MIGRATION_LOCK_ID = 0x6964656d;

/** Which migrations a database has had; kept apart from the app's own drizzle journal. */
const appliedMigrations = pgTable('idem_migrations', {
  hash: text('hash').primaryKey(),
  tag: text('tag').notNull(),
  appliedAt: timestamp('applied_at', { withTimezone: true }).notNull(),
});

const CREATE_MIGRATIONS_TABLE =
  'create table idem_migrations (' +
  'hash text primary key, tag text not null, applied_at timestamptz not null default now())';

export interface MigrateResult {
  /** The tags of the migrations this call applied, oldest first (empty when up to date). */
  applied: string[];
}

/**
 * Creates or upgrades idem's tables. Safe to call at every start, from any number of app
 * servers at once: the whole run is one transaction that first takes an advisory lock,
 * so concurrent callers wait for each other, and a later one finds the work done and
 * applies nothing. A migration that fails rolls everything back.
 *
 * Works with any Drizzle Postgres database (postgres-js, node-postgres, PGlite, …) or
 * transaction, and reads no files: the SQL is bundled, so it runs inside a Next.js build
 * too.
 *
 * @example
 * const db = drizzle(postgres(process.env.DATABASE_URL!));
 * await migrate(db);
 */
export async function migrate(db: PgDatabaseLike): Promise<MigrateResult> {
  return migrateWith(db, bundledMigrations);
}

/** `migrate` with an explicit list, for tests of the procedure itself. */
export async function migrateWith(
  db: PgDatabaseLike,
  migrations: readonly BundledMigration[],
): Promise<MigrateResult> {
  // On its own connection's terms: a connection killed under it rejects the call, and the
  // driver is never let to send the ROLLBACK to the closed socket (which ends a postgres.js
  // process from a timer, past any try/catch of the caller's).
  // And on a node-postgres pool, the client it runs on is heard when its connection fails.
  hearCheckedOutErrors(db);
  return transactionOnItsConnection(db, async (tx) => {
    // First, before reading anything: whoever waits here reads the winner's commit next,
    // because each statement of a READ COMMITTED transaction takes a fresh snapshot.
    await tx.execute(sql.raw(`select pg_advisory_xact_lock(${MIGRATION_LOCK_ID})`));
    // Not `create table if not exists`: that logs "already exists, skipping" through the
    // driver on every start.
    await tx.execute(
      sql.raw(
        `do $$ begin if to_regclass('idem_migrations') is null then ${CREATE_MIGRATIONS_TABLE}; end if; end $$`,
      ),
    );
    const done = new Set(
      (await tx.select({ hash: appliedMigrations.hash }).from(appliedMigrations)).map(
        (row) => row.hash,
      ),
    );
    const applied: string[] = [];
    for (const migration of migrations) {
      if (done.has(migration.hash)) continue;
      for (const statement of migration.statements) {
        await tx.execute(sql.raw(statement));
      }
      await tx
        .insert(appliedMigrations)
        .values({ hash: migration.hash, tag: migration.tag, appliedAt: sql`now()` });
      applied.push(migration.tag);
    }
    return { applied };
  });
}
