import { and, eq, type SQL, sql } from 'drizzle-orm';
import type { PgDatabaseLike } from './PgDatabaseLike.js';
import { COLUMNS } from './readFirstClaim.js';
import { idempotencyKeys as keys } from './schema.js';
import { sqlInstant, sqlLater } from './sqlTime.js';

/**
 * The statements that carry several calls at once (see `storeGathering`): each takes one
 * array per value of a call, unnested into one row per call, and answers each call by its
 * place in the arrays (from 1) or by its key.
 */

/** The arrays bound per statement, one element per call. */
const param = {
  scopes: sql.placeholder('scopes'),
  keys: sql.placeholder('keys'),
  fingerprints: sql.placeholder('fingerprints'),
  leasesMs: sql.placeholder('leasesMs'),
  ttlsMs: sql.placeholder('ttlsMs'),
  versions: sql.placeholder('versions'),
  createdAts: sql.placeholder('createdAts'),
  outcomes: sql.placeholder('outcomes'),
};

/** What these statements are built from: the store's database, its "now" and its epoch ms. */
interface ManyParts {
  db: PgDatabaseLike;
  now: SQL;
  nowMs: SQL<number>;
}

/** The rows of several keys, each with the place of the read it answers: a key asked twice comes twice. */
export function readManyStatement({ db, nowMs }: ManyParts) {
  return db
    .select({ place: sql<number>`wanted.place`.mapWith(Number), ...COLUMNS, nowMs })
    .from(keys)
    .innerJoin(
      sql`unnest(${param.scopes}::text[], ${param.keys}::text[]) with ordinality as wanted(scope, key, place)`,
      sql`${keys.scope} = wanted.scope and ${keys.key} = wanted.key`,
    );
}

/**
 * New keys, each inserted where no row has it and returned with the statement's "now". Rows
 * go in in the order given: callers sort them, so that two such statements with keys in
 * common never wait for each other in a cycle.
 */
export function insertManyStatement({ db, now, nowMs }: ManyParts) {
  const wanted = sql`unnest(${param.scopes}::text[], ${param.keys}::text[], ${param.fingerprints}::text[], ${param.leasesMs}::float8[], ${param.ttlsMs}::float8[]) as wanted(scope, key, fingerprint, lease_ms, ttl_ms)`;
  const lockedUntil = sqlLater(now, sql`wanted.lease_ms`);
  const expiresAt = sqlLater(now, sql`wanted.ttl_ms`);
  // Every column, in table order, as a new key's claim writes it.
  return db
    .insert(keys)
    .select(
      sql`select wanted.scope, wanted.key, wanted.fingerprint, 'in_progress', 1, ${lockedUntil}, 1, null::json, '{}'::jsonb, ${now}, null::timestamptz, ${expiresAt} from ${wanted}`,
    )
    .onConflictDoNothing({ target: [keys.scope, keys.key] })
    .returning({ scope: keys.scope, key: keys.key, nowMs: nowMs.as('now_ms') });
}

/**
 * Completions, each fenced by its own holder's incarnation (version, creation time, in
 * progress) as a completion alone is, and answered by its place where it held its key.
 */
export function completeManyStatement({ db, now }: ManyParts) {
  const done = sql`unnest(${param.scopes}::text[], ${param.keys}::text[], ${param.versions}::int[], ${param.createdAts}::float8[], ${param.outcomes}::text[], ${param.ttlsMs}::float8[]) with ordinality as done(scope, key, version, created_at, outcome, ttl_ms, place)`;
  return db
    .update(keys)
    .set({
      status: 'completed',
      outcome: sql`done.outcome::json`,
      completedAt: now,
      lockedUntil: null,
      expiresAt: sqlLater(now, sql`done.ttl_ms`),
    })
    .from(done)
    .where(
      and(
        eq(keys.scope, sql`done.scope`),
        eq(keys.key, sql`done.key`),
        eq(keys.version, sql`done.version`),
        eq(keys.createdAt, sqlInstant(sql`done.created_at`)),
        eq(keys.status, 'in_progress'),
      ),
    )
    .returning({ place: sql<number>`done.place`.mapWith(Number), version: keys.version });
}
