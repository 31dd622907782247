/**
 * A JSON value as stores keep it. The engine serializes outcomes and step results into
 * this shape before a store sees them, so every store (memory, PGlite, Postgres) holds
 * and returns exactly the same thing.
 */
export type JsonValue =
  | null
  | boolean
  | number
  | string
  | JsonValue[]
  | { [key: string]: JsonValue };

/** A stored error: what a deterministic failure replays as. */
export interface StoredError {
  name: string;
  message: string;
  /** An application code (a tRPC code such as `'BAD_REQUEST'`, or your own). */
  code?: string;
  /** Structured details that replay unchanged. */
  data?: JsonValue;
}

/** The final result of a key: the success value or the stored deterministic error. */
export type StoredOutcome =
  | { kind: 'success'; value: JsonValue }
  | { kind: 'error'; error: StoredError };

export type RecordStatus = 'in_progress' | 'completed';

/**
 * One key's record. Times are epoch milliseconds as decided by the store's clock
 * (see `IdempotencyStore` for which clock that is).
 */
export interface IdempotencyRecord {
  scope: string;
  key: string;
  /** SHA-256 of the canonical request; a different one means another payload. */
  fingerprint: string;
  status: RecordStatus;
  /** The fencing token: starts at 1 and grows by one on every claim of the key. */
  version: number;
  /** When the current holder's lease ends; `null` once completed. */
  lockedUntil: number | null;
  /** How many times the key was claimed (first run plus takeovers). */
  attempts: number;
  outcome: StoredOutcome | null;
  /** Recovery points: step name → stored result, kept across takeovers. */
  steps: Record<string, JsonValue>;
  createdAt: number;
  completedAt: number | null;
  /** After this the record counts as gone: a new claim starts afresh, `sweep` deletes it. */
  expiresAt: number;
}

/** What a holder presents to prove it still owns the key (fencing). */
export interface LeaseToken {
  scope: string;
  key: string;
  version: number;
  /**
   * The record's `createdAt`. Versions restart at 1 when a swept key is claimed afresh, so
   * `version` alone could match a new record; with the creation time the token names one
   * incarnation of the key, and a holder from before the sweep stays fenced out.
   */
  createdAt: number;
}

/** The token that proves ownership of `record` as it was claimed. */
export function leaseTokenOf(record: IdempotencyRecord): LeaseToken {
  return {
    scope: record.scope,
    key: record.key,
    version: record.version,
    createdAt: record.createdAt,
  };
}

/**
 * A record is expired once `expiresAt` has passed, but an in-progress one only when its
 * lease has run out too: a holder that is alive is never swept from under its feet.
 */
export function isExpired(
  record: Pick<IdempotencyRecord, 'status' | 'lockedUntil' | 'expiresAt'>,
  now: number,
): boolean {
  return (
    record.expiresAt <= now &&
    (record.status === 'completed' || record.lockedUntil === null || record.lockedUntil <= now)
  );
}

/** The lease of an in-progress record has run out: the next claim takes it over. */
export function isLeaseExpired(record: IdempotencyRecord, now: number): boolean {
  return record.status === 'in_progress' && (record.lockedUntil ?? 0) <= now;
}

/** What a claim asks for: the store's `claim`, and the claim table of `decideClaim`. */
export interface ClaimRequest {
  scope: string;
  key: string;
  fingerprint: string;
  /** How long the claimant holds the key before another attempt may take it over. */
  leaseMs: number;
  /** How long the record lives; completion restarts this from the completion time. */
  ttlMs: number;
}

/** The decision of one claim: what to answer, and the record to write (if it changes). */
export type ClaimDecision =
  | { status: 'claimed'; takeover: boolean; next: IdempotencyRecord }
  | { status: 'replay'; record: IdempotencyRecord }
  | { status: 'mismatch'; record: IdempotencyRecord }
  | { status: 'in_progress'; record: IdempotencyRecord; retryAfterMs: number };

/**
 * The claim table as a pure function of the existing record and the time. Stores that
 * cannot run it atomically themselves (a database) implement the same table in one
 * statement; the conformance suite holds them to it.
 */
export function decideClaim(
  existing: IdempotencyRecord | null | undefined,
  input: ClaimRequest,
  now: number,
): ClaimDecision {
  if (!existing) return { status: 'claimed', takeover: false, next: freshRecord(input, now, 1) };
  if (isExpired(existing, now)) {
    return {
      status: 'claimed',
      takeover: false,
      next: freshRecord(input, now, existing.version + 1),
    };
  }
  if (existing.fingerprint !== input.fingerprint) return { status: 'mismatch', record: existing };
  if (existing.status === 'completed') return { status: 'replay', record: existing };
  if (!isLeaseExpired(existing, now)) {
    return {
      status: 'in_progress',
      record: existing,
      retryAfterMs: Math.max(0, (existing.lockedUntil ?? now) - now),
    };
  }
  return {
    status: 'claimed',
    takeover: true,
    next: {
      ...existing,
      version: existing.version + 1,
      lockedUntil: now + input.leaseMs,
      attempts: existing.attempts + 1,
      expiresAt: Math.max(existing.expiresAt, now + input.ttlMs),
    },
  };
}

/** A record claimed afresh: no steps, first attempt. */
function freshRecord(input: ClaimRequest, now: number, version: number): IdempotencyRecord {
  return {
    scope: input.scope,
    key: input.key,
    fingerprint: input.fingerprint,
    status: 'in_progress',
    version,
    lockedUntil: now + input.leaseMs,
    attempts: 1,
    outcome: null,
    steps: {},
    createdAt: now,
    completedAt: null,
    expiresAt: now + input.ttlMs,
  };
}
