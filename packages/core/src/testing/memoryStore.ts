import { type Clock, systemClock } from '../Clock.js';
import { LeaseLostError } from '../errors/LeaseLostError.js';
import type {
  ClaimRequest,
  ClaimResult,
  IdempotencyStore,
  SweepOptions,
} from '../IdempotencyStore.js';
import {
  decideClaim,
  type IdempotencyRecord,
  isExpired,
  type JsonValue,
  type LeaseToken,
  type StoredOutcome,
} from '../record.js';

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
 * An `IdempotencyStore` in one process's memory: for tests, examples and single-process
 * tools. Each method reads and writes synchronously between its awaits, so concurrent
 * async callers see every step as atomic. Records are deep-copied in and out: a caller
 * can never change a stored outcome by mutating what it got back.
 */
export function memoryStore(options: MemoryStoreOptions = {}): MemoryStore {
  const clock = options.clock ?? systemClock;
  const records = new Map<string, IdempotencyRecord>();
  const id = (scope: string, key: string) => `${scope.length}:${scope}\u0000${key}`;

  const held = (token: LeaseToken): IdempotencyRecord => {
    const record = records.get(id(token.scope, token.key));
    if (
      record?.status !== 'in_progress' ||
      record.version !== token.version ||
      record.createdAt !== token.createdAt
    ) {
      throw new LeaseLostError(token.scope, token.key, token.version);
    }
    return record;
  };

  return {
    async claim(request: ClaimRequest): Promise<ClaimResult> {
      const recordId = id(request.scope, request.key);
      const decision = decideClaim(records.get(recordId), request, clock.now());
      if (decision.status !== 'claimed') {
        return { ...decision, record: structuredClone(decision.record) } as ClaimResult;
      }
      records.set(recordId, decision.next);
      return {
        status: 'claimed',
        takeover: decision.takeover,
        record: structuredClone(decision.next),
      };
    },

    async complete(token: LeaseToken, outcome: StoredOutcome, ttlMs: number): Promise<void> {
      const record = held(token);
      const now = clock.now();
      Object.assign(record, {
        status: 'completed',
        outcome: structuredClone(outcome),
        completedAt: now,
        lockedUntil: null,
        expiresAt: now + ttlMs,
      } satisfies Partial<IdempotencyRecord>);
    },

    async release(token: LeaseToken): Promise<void> {
      held(token).lockedUntil = clock.now();
    },

    async heartbeat(token: LeaseToken, leaseMs: number): Promise<void> {
      held(token).lockedUntil = clock.now() + leaseMs;
    },

    async saveStep(token: LeaseToken, name: string, value: JsonValue): Promise<void> {
      const record = held(token);
      record.steps = { ...record.steps, [name]: structuredClone(value) };
    },

    async get(scope: string, key: string): Promise<IdempotencyRecord | null> {
      const record = records.get(id(scope, key));
      return record && !isExpired(record, clock.now()) ? structuredClone(record) : null;
    },

    async sweep({ limit }: SweepOptions): Promise<number> {
      const now = clock.now();
      let deleted = 0;
      for (const [recordId, record] of records) {
        if (deleted >= limit) break;
        if (isExpired(record, now)) {
          records.delete(recordId);
          deleted++;
        }
      }
      return deleted;
    },

    size: () => records.size,
  };
}
