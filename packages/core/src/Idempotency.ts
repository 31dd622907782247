import type { IdempotencySettings } from './resolveSettings.js';

export interface ExecuteRequest {
  /** Who is asking and for what (tenant/user and procedure); keys never cross scopes. */
  scope: string;
  /** The client's idempotency key: 1–255 printable ASCII characters. */
  key: string;
  /** The request payload; its fingerprint binds the key to this exact request. */
  input?: unknown;
  /** A precomputed fingerprint, used instead of fingerprinting `input`. */
  fingerprint?: string;
}

/** What the handler gets to do its work safely. */
export interface HandlerContext {
  key: string;
  scope: string;
  /** Aborted when this attempt loses its lease: stop, another attempt owns the key now. */
  signal: AbortSignal;
  /**
   * A recovery point: runs `fn` once per key. Its result is saved under `name`; a later
   * attempt (after a crash or a released failure) gets the saved result without running `fn`.
   */
  step<T>(name: string, fn: () => Promise<T> | T): Promise<T>;
  /**
   * A key for a downstream call (a payment provider, another service) that is the same on
   * every attempt of this key and differs between scopes.
   */
  deriveKey(suffix: string): string;
  /** 1 on the first claim, then one more per takeover. */
  attempt: number;
  /** The fencing version this attempt holds. */
  version: number;
  /** This attempt took over from one whose lease expired (crash or released failure). */
  takeover: boolean;
}

export interface ExecuteResult<T> {
  value: T;
  /** The value came from the store: the handler did not run. */
  replayed: boolean;
  /** The fencing version that produced the value. */
  version: number;
}

/**
 * What one run of a handler came to, as `run` takes it:
 * - `{ ok: true, value }`: the answer; `stored` (default `value`) is kept for replays;
 * - `keep: 'answer'`: the same, where a transaction's writes are rolled back (an adapter's
 *   transaction mode; nothing else has writes to undo);
 * - `keep: 'nothing'`: answer with `value`, store nothing, free the key (a retry runs again);
 * - `{ ok: false, error }`: a failure; the error policy stores it or frees the key.
 */
export type Attempt<T> =
  | { ok: true; value: T; stored?: unknown; keep?: 'all' | 'answer' | 'nothing' }
  | { ok: false; error: unknown };

/**
 * How a keyed call ended, as a value: `run` throws only for what no caller expects (a
 * store that failed, options that cannot work).
 * - `{ ok: true, replayed: false, value }`: the handler ran; `value` is its answer;
 * - `{ ok: true, replayed: true, value }`: the stored answer of an earlier run, deserialized;
 * - `{ ok: false, error }`: the handler's failure (stored or released by the error policy),
 *   a stored failure replayed (`replayed: true`), or idem's refusal: `KeyMismatchError`,
 *   `RequestInProgressError`, `LeaseLostError`, `UnserializableValueError` (a result that
 *   could not be stored, which is then the key's outcome).
 */
export type RunResult<T> =
  | { ok: true; replayed: false; value: T; version: number }
  | { ok: true; replayed: true; value: unknown; version: number }
  | { ok: false; replayed: boolean; error: unknown };

export interface Idempotency {
  /**
   * Claims the key and runs `handler` once, or answers from the store, and says how it
   * ended as a value: see {@link RunResult}. The form adapters build on.
   */
  run<T>(
    request: ExecuteRequest,
    handler: (context: HandlerContext) => Promise<Attempt<T>>,
  ): Promise<RunResult<T>>;
  /**
   * `run` for an app: the handler's return value is the answer, a thrown error its failure,
   * and every failure (a refusal, a replayed stored error) is thrown.
   */
  execute<T>(
    request: ExecuteRequest,
    handler: (context: HandlerContext) => Promise<T> | T,
  ): Promise<ExecuteResult<T>>;
  /** The resolved settings, for adapters that build on the engine. */
  readonly settings: IdempotencySettings;
}
