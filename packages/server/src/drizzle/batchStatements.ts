import type { ClaimRequest, IdempotencyRecord, LeaseToken } from '@idem/core/store';
import { sql } from 'drizzle-orm';
import type { PgDatabaseLike } from './PgDatabaseLike.js';
import { executeRows } from './rows.js';
import { sqlLater, sqlNow } from './sqlTime.js';

/** What the first statement of a claim found for one key: the row, and whether it inserted it. */
export interface FoundKey {
  inserted: boolean;
  record: IdempotencyRecord;
  /** The statement's "now", epoch milliseconds. */
  nowMs: number;
}

/** A completion as the store's `complete` receives it, the outcome already JSON text. */
export interface Completion {
  token: LeaseToken;
  outcome: string;
  ttlMs: number;
}

/**
 * The claim's first statement and the completion for many keys at once, in autocommit:
 * each the same statement as its one-key form (same "now" for every key, the database's),
 * over `unnest` of one array per column.
 *
 * They are sent unprepared, so that Postgres plans each with the arrays in hand: `unnest`
 * of a known array tells the planner how many rows it yields, and a handful of keys is
 * looked up through the primary key. A prepared (generic) plan would guess, and a guess
 * made while the table is small (a scan of all of it) would be kept as it grows.
 */
export function batchStatements(db: PgDatabaseLike) {
  const now = sqlNow(undefined);
  const nowMs = sql`(extract(epoch from ${now}) * 1000)::float8`;
  const epochMs = (table: string, column: string) =>
    sql.raw(`(extract(epoch from ${table}.${column}) * 1000)::float8 as ${column}_ms`);
  const returned = (table: string) =>
    sql.join(
      [
        sql.raw(`${table}.scope, ${table}.key, ${table}.fingerprint, ${table}.status,`),
        sql.raw(`${table}.version, ${table}.attempts,`),
        sql.raw(`${table}.outcome::text as outcome_text, ${table}.steps::text as steps_text,`),
        epochMs(table, 'locked_until'),
        sql.raw(','),
        epochMs(table, 'created_at'),
        sql.raw(','),
        epochMs(table, 'completed_at'),
        sql.raw(','),
        epochMs(table, 'expires_at'),
      ],
      sql.raw(' '),
    );

  return {
    /**
     * Inserts each key that is new, reads each that exists: per request, its row, or
     * `undefined` when there is none to read (a concurrent claim inserted it after this
     * statement's snapshot, and the one-key claim has to look again).
     */
    async insertOrRead(requests: readonly ClaimRequest[]): Promise<(FoundKey | undefined)[]> {
      // One row per key, in key order: a key asked for twice is inserted (or read) once, and
      // every statement locks the keys it inserts in one order, so two servers' statements
      // cannot deadlock on each other's new keys.
      const firsts = new Map<string, ClaimRequest>();
      for (const request of requests) {
        const row = rowKey(request.scope, request.key);
        if (!firsts.has(row)) firsts.set(row, request);
      }
      const unique = sortedByRow(firsts);
      // The read sees the table as it was before the insert: a key this statement inserts
      // comes back once, from `inserted`, and a key that existed once, from the read.
      const rows = await executeRows<BatchRow>(
        db,
        sql`with u as (
          select * from unnest(
            ${textArray(unique.map((r) => r.scope))}::text[],
            ${textArray(unique.map((r) => r.key))}::text[],
            ${textArray(unique.map((r) => r.fingerprint))}::text[],
            ${numberArray(unique.map((r) => r.leaseMs))}::float8[],
            ${numberArray(unique.map((r) => r.ttlMs))}::float8[]
          ) as u(scope, key, fingerprint, lease_ms, ttl_ms)
        ), inserted as (
          insert into idem_keys (scope, key, fingerprint, status, version, locked_until,
            attempts, outcome, steps, created_at, completed_at, expires_at)
          select u.scope, u.key, u.fingerprint, 'in_progress', 1, ${sqlLater(now, sql`u.lease_ms`)},
            1, null, '{}'::jsonb, ${now}, null, ${sqlLater(now, sql`u.ttl_ms`)}
          from u
          on conflict (scope, key) do nothing
          returning *
        )
        select ${returned('i')}, true as inserted, ${nowMs} as now_ms from inserted i
        union all
        select ${returned('k')}, false, ${nowMs}
          from u join idem_keys k on k.scope = u.scope and k.key = u.key`,
      );
      const byRow = new Map(rows.map((row) => [rowKey(row.scope, row.key), row]));
      return requests.map((request) => {
        const key = rowKey(request.scope, request.key);
        const row = byRow.get(key);
        if (!row) return undefined;
        // A repeated key finds the row its first request inserted, as a claim right after
        // that one would: the first request holds it.
        const inserted = row.inserted && firsts.get(key) === request;
        return { inserted, record: toRecord(row), nowMs: row.now_ms };
      });
    },

    /**
     * Completes each key its token still holds: per completion, whether it did (`false`:
     * fenced out, as the one-key completion's empty `RETURNING`).
     */
    async complete(completions: readonly Completion[]): Promise<boolean[]> {
      const unique = sortedByRow(
        new Map(completions.map((c) => [rowKey(c.token.scope, c.token.key), c])),
      );
      if (unique.length !== completions.length) {
        throw new Error('batchStatements.complete: one key twice in one statement');
      }
      const rows = await executeRows<{ scope: string; key: string }>(
        db,
        sql`update idem_keys k set status = 'completed', outcome = u.outcome::json,
          completed_at = ${now}, locked_until = null, expires_at = ${sqlLater(now, sql`u.ttl_ms`)}
        from unnest(
          ${textArray(unique.map((c) => c.token.scope))}::text[],
          ${textArray(unique.map((c) => c.token.key))}::text[],
          ${numberArray(unique.map((c) => c.token.version))}::int[],
          ${textArray(unique.map((c) => new Date(c.token.createdAt).toISOString()))}::timestamptz[],
          ${textArray(unique.map((c) => c.outcome))}::text[],
          ${numberArray(unique.map((c) => c.ttlMs))}::float8[]
        ) as u(scope, key, version, created_at, outcome, ttl_ms)
        where k.scope = u.scope and k.key = u.key and k.version = u.version
          and k.created_at = u.created_at and k.status = 'in_progress'
        returning k.scope, k.key`,
      );
      const done = new Set(rows.map((row) => rowKey(row.scope, row.key)));
      return completions.map((c) => done.has(rowKey(c.token.scope, c.token.key)));
    },
  };
}

/** The values of `byRow`, in the order of their row keys. */
function sortedByRow<T>(byRow: ReadonlyMap<string, T>): T[] {
  return [...byRow.keys()].sort().map((row) => byRow.get(row)!);
}

/** Names one row of `idem_keys`: a scope and a key. */
export const rowKey = (scope: string, key: string) => `${scope.length}:${scope}${key}`;

interface BatchRow {
  scope: string;
  key: string;
  fingerprint: string;
  status: IdempotencyRecord['status'];
  version: number;
  attempts: number;
  outcome_text: string | null;
  steps_text: string;
  locked_until_ms: number | null;
  created_at_ms: number;
  completed_at_ms: number | null;
  expires_at_ms: number;
  inserted: boolean;
  now_ms: number;
}

function toRecord(row: BatchRow): IdempotencyRecord {
  return {
    scope: row.scope,
    key: row.key,
    fingerprint: row.fingerprint,
    status: row.status,
    version: row.version,
    lockedUntil: row.locked_until_ms,
    attempts: row.attempts,
    outcome: row.outcome_text === null ? null : JSON.parse(row.outcome_text),
    steps: JSON.parse(row.steps_text),
    createdAt: row.created_at_ms,
    completedAt: row.completed_at_ms,
    expiresAt: row.expires_at_ms,
  };
}

/** A Postgres array literal of text: every element quoted, `"` and `\` escaped. */
function textArray(values: readonly string[]): string {
  return `{${values.map((value) => `"${value.replace(/["\\]/g, '\\$&')}"`).join(',')}}`;
}

/** A Postgres array literal of numbers. */
function numberArray(values: readonly number[]): string {
  return `{${values.join(',')}}`;
}
