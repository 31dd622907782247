import { type SQL, sql } from 'drizzle-orm';

/**
 * The first key of the two-key advisory lock that transaction mode holds on one
 * idempotency key: "idky" in ASCII. The two-int form keeps it apart from the app's
 * one-bigint locks and from the outbox's per-aggregate locks (another first key).
 */
const KEY_LOCK_NAMESPACE = 0x69646b79;

/**
 * The arguments of `pg_advisory_*lock` for one key: the namespace and a 32-bit hash of
 * scope and key. Two keys that share a hash only ever wait for each other; they never
 * share an outcome, which the key's row decides.
 */
export function keyLockArgs(scope: unknown, key: unknown): SQL {
  return sql`${KEY_LOCK_NAMESPACE}::int4, hashtext(${scope}::text || ':' || ${key}::text)`;
}
