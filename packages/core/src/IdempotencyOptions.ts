import type { Clock } from './Clock.js';
import type { ErrorPolicyOption } from './errorPolicy.js';
import type { Serializer } from './serializer.js';
import type { IdempotencyStore } from './store/IdempotencyStore.js';

export type IdempotencyEventType =
  | 'claimed'
  | 'takeover'
  | 'replayed'
  | 'in_progress'
  | 'mismatch'
  | 'completed'
  | 'released'
  | 'lease_lost';

/** One thing that happened to a key, for logs and metrics. */
export interface IdempotencyEvent {
  type: IdempotencyEventType;
  scope: string;
  key: string;
  /** The fencing version involved, when there is one. */
  version?: number;
  /** Time since `execute` was called, by the engine's monotonic clock. */
  durationMs: number;
  /** The error behind `released`, `completed` with a stored error, or `lease_lost`. */
  error?: unknown;
  /**
   * On `completed`: why the outcome could not be stored as it was (the serializer's error,
   * e.g. an `UnserializableValueError` with its `path`). Either the result of the procedure
   * or of a recovery point was refused, and the `UnserializableValueError` in `error` was
   * stored as the key's outcome instead; or the data of a stored error was left out.
   * Always a bug to fix in the procedure.
   */
  unstorable?: unknown;
  /**
   * How the call runs: `'lease'` (this engine) or `'transaction'` (the tRPC middleware's
   * transaction mode), for metrics by mode.
   */
  mode?: 'lease' | 'transaction';
}

export interface InProgressWait {
  /** The longest a duplicate waits for the first request to finish before a 409. */
  waitMs: number;
  /**
   * How often it looks again.
   * @default 50
   */
  pollMs?: number;
}

export interface IdempotencyOptions {
  /**
   * Where keys live: `drizzleStore(db)` from `@idem/server/postgres`, `redisStore(client)` from
   * `@idem/redis`, `memoryStore()` from `@idem/core/testing` (one process), or your own.
   */
  store: IdempotencyStore;
  /**
   * How long a claim holds the key before another attempt may take it over. The heartbeat
   * renews it while the handler runs, so this bounds how long a crashed holder blocks retries.
   * @default 30_000
   */
  leaseMs?: number;
  /**
   * How long a completed key is kept and replayed. Must outlast the longest retry window.
   * @default 86_400_000 (24 h)
   */
  ttlMs?: number;
  /**
   * How often a running handler renews its lease.
   * @default leaseMs / 3
   */
  heartbeatMs?: number;
  /**
   * The longest time over which your clients retry one call (e.g. the client's deadline).
   * When set, start-up refuses a `ttlMs` shorter than it: a retry that arrives after the
   * record expired would run the work a second time.
   * @default undefined (only ttlMs > leaseMs is checked)
   */
  retryWindowMs?: number;
  /**
   * Which failures are stored and replayed, and which release the key.
   * @default defaultErrorPolicy
   */
  errorPolicy?: ErrorPolicyOption;
  /**
   * How outcomes and step results become JSON for the store and come back. The default
   * keeps every type superjson sends for a typical app (Date, BigInt, Map, Set, undefined,
   * NaN, ±Infinity, -0); for others (RegExp, URL, custom classes), wrap superjson itself:
   * `{ serialize: (v) => superjson.serialize(v) as JsonValue, deserialize: (j) => superjson.deserialize(j as never) }`.
   * @default taggedJsonSerializer
   */
  serializer?: Serializer;
  /**
   * The longest wait a duplicate is told (`RequestInProgressError.retryAfterMs`, HTTP
   * `Retry-After`) while the first request runs: the time left on the holder's lease, but at
   * most this. A live holder usually finishes long before its lease ends, and a client
   * told to wait out a whole lease may give up at its own deadline first.
   * @default 1_000
   */
  inProgressRetryAfterMs?: number;
  /**
   * What a duplicate does while the first request still runs: answer at once with
   * `RequestInProgressError`, or wait up to `waitMs` for it to finish and replay.
   * @default 'reject'
   */
  inProgress?: 'reject' | InProgressWait;
  /**
   * The engine's clock: its monotonic time paces heartbeats, bounds waits and tells a
   * holder how much of its lease is left. Takeovers are judged by the store's clock.
   * @default systemClock
   */
  clock?: Clock;
  /** Called for every event; an exception thrown here is swallowed. */
  onEvent?: (event: IdempotencyEvent) => void;
}
