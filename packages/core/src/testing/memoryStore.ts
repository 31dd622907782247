import { type Clock, systemClock } from '../Clock.js';
import { LeaseLostError } from '../errors/LeaseLostError.js';
import type { ClaimResult, IdempotencyStore, SweepOptions } from '../store/IdempotencyStore.js';
import {
  type ClaimRequest,
  decideClaim,
  type IdempotencyRecord,
  isExpired,
  type JsonValue,
  type LeaseToken,
  type StoredOutcome,
} from '../store/record.js';
import { defineOwn } from '../taggedJsonDecode.js';

export interface MemoryStoreOptions {
  /**
   * Where "now" comes from for leases and expiry.
   * @default systemClock
   */
  clock?: Clock;
}

/** A memory store also lets tests look inside. */
export interface MemoryStore extends IdempotencyStore {
  /** How many records it holds, expired ones included until swept. */
  size(): number;
}

/**
 * A record as the memory store keeps it: outcome and steps as JSON text, as a database
 * keeps them. Text is one compact string per record, and parsing it is the deep copy a
 * caller gets.
 */
type KeptRecord = Omit<IdempotencyRecord, 'outcome' | 'steps'> & {
  outcome: string | null;
  steps: string;
};

const NO_STEPS = '{}';

/** Scope → key → record: two lookups of strings whose hashes are cached, no joined id. */
type Scopes = Map<string, Map<string, KeptRecord>>;

/**
 * An `IdempotencyStore` in one process's memory: for tests, examples and single-process
 * tools. Each method reads and writes synchronously between its awaits, so concurrent
 * async callers see every step as atomic. Records are copied in and out (outcomes and
 * steps kept as JSON text): a caller can never change a stored outcome by mutating what it
 * got back.
 */
export function memoryStore(options: MemoryStoreOptions = {}): MemoryStore {
  const clock = options.clock ?? systemClock;
  const scopes: Scopes = new Map();

  return {
    async claim(request: ClaimRequest): Promise<ClaimResult> {
      return claimIn(scopes, request, clock.now());
    },

    async complete(token: LeaseToken, outcome: StoredOutcome, ttlMs: number): Promise<void> {
      const record = held(scopes, token);
      const now = clock.now();
      record.status = 'completed';
      record.outcome = JSON.stringify(outcome);
      record.completedAt = now;
      record.lockedUntil = null;
      record.expiresAt = now + ttlMs;
    },

    async release(token: LeaseToken): Promise<void> {
      held(scopes, token).lockedUntil = clock.now();
    },

    async heartbeat(token: LeaseToken, leaseMs: number): Promise<void> {
      held(scopes, token).lockedUntil = clock.now() + leaseMs;
    },

    async saveStep(token: LeaseToken, name: string, value: JsonValue): Promise<void> {
      const record = held(scopes, token);
      const steps = JSON.parse(record.steps) as Record<string, JsonValue>;
      defineOwn(steps, name, value);
      record.steps = JSON.stringify(steps);
    },

    async get(scope: string, key: string): Promise<IdempotencyRecord | null> {
      const record = scopes.get(scope)?.get(key);
      return record && !isExpired(record, clock.now()) ? recordOf(record) : null;
    },

    async sweep({ limit }: SweepOptions): Promise<number> {
      return sweepExpired(scopes, clock.now(), limit);
    },

    size: () => {
      let size = 0;
      for (const keys of scopes.values()) size += keys.size;
      return size;
    },
  };
}

/** The claim table at `now`, the record claimed kept as text. */
function claimIn(scopes: Scopes, request: ClaimRequest, now: number): ClaimResult {
  let keys = scopes.get(request.scope);
  const kept = keys?.get(request.key);
  const decision = decideClaim(kept && recordOf(kept), request, now);
  if (decision.status !== 'claimed') return decision;
  if (keys === undefined) {
    keys = new Map();
    scopes.set(request.scope, keys);
  }
  // `next` was built for this call alone: the store keeps its own copy, as text.
  keys.set(request.key, keep(decision.next));
  return { status: 'claimed', takeover: decision.takeover, record: decision.next };
}

/** The record `token` holds, or `LeaseLostError` when its lease is not the one held. */
function held(scopes: Scopes, token: LeaseToken): KeptRecord {
  const record = scopes.get(token.scope)?.get(token.key);
  if (
    record?.status !== 'in_progress' ||
    record.version !== token.version ||
    record.createdAt !== token.createdAt
  ) {
    throw new LeaseLostError(token.scope, token.key, token.version);
  }
  return record;
}

/** Deletes up to `limit` records expired at `now`; how many it deleted. */
function sweepExpired(scopes: Scopes, now: number, limit: number): number {
  let deleted = 0;
  for (const [scope, keys] of scopes) {
    for (const [key, record] of keys) {
      if (deleted >= limit) return deleted;
      if (isExpired(record, now)) {
        keys.delete(key);
        deleted++;
      }
    }
    if (keys.size === 0) scopes.delete(scope);
  }
  return deleted;
}

/** The record as kept: its JSON as text. */
function keep(record: IdempotencyRecord): KeptRecord {
  return withJson(
    record,
    record.outcome === null ? null : JSON.stringify(record.outcome),
    hasNone(record.steps) ? NO_STEPS : JSON.stringify(record.steps),
  );
}

/** A copy of a kept record for a caller: its JSON parsed afresh. */
function recordOf(kept: KeptRecord): IdempotencyRecord {
  return withJson(
    kept,
    kept.outcome === null ? null : (JSON.parse(kept.outcome) as StoredOutcome),
    kept.steps === NO_STEPS ? {} : (JSON.parse(kept.steps) as Record<string, JsonValue>),
  );
}

/**
 * `record` with `outcome` and `steps` in their other form (text or parsed): every field
 * written out, one shape, no spread.
 */
function withJson<Outcome, Steps>(
  record: Omit<IdempotencyRecord, 'outcome' | 'steps'>,
  outcome: Outcome,
  steps: Steps,
) {
  return {
    scope: record.scope,
    key: record.key,
    fingerprint: record.fingerprint,
    status: record.status,
    version: record.version,
    lockedUntil: record.lockedUntil,
    attempts: record.attempts,
    outcome,
    steps,
    createdAt: record.createdAt,
    completedAt: record.completedAt,
    expiresAt: record.expiresAt,
  };
}

function hasNone(object: object): boolean {
  for (const _ in object) return false;
  return true;
}
