import { type Clock, systemClock } from './Clock.js';
import { deriveKey } from './deriveKey.js';
import {
  type ErrorPolicy,
  type ErrorPolicyOption,
  resolveErrorPolicy,
  storedErrorOf,
} from './errorPolicy.js';
import { ConfigurationError } from './errors/ConfigurationError.js';
import { KeyMismatchError } from './errors/KeyMismatchError.js';
import { isLeaseLostError } from './errors/LeaseLostError.js';
import { RequestInProgressError } from './errors/RequestInProgressError.js';
import {
  isUnserializableValueError,
  UnserializableValueError,
} from './errors/UnserializableValueError.js';
import { fingerprint as fingerprintOf } from './fingerprint.js';
import type { ClaimResult, IdempotencyStore } from './IdempotencyStore.js';
import { startLease } from './lease.js';
import { type IdempotencyRecord, type JsonValue, type LeaseToken, leaseTokenOf } from './record.js';
import { type Serializer, taggedJsonSerializer } from './serializer.js';
import { validateKey } from './validateKey.js';

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
  /** Where keys live: `memoryStore()`, `drizzleStore(db)` from `@idem/server`, or your own. */
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
   * How outcomes and step results become JSON for the store and come back.
   * @default taggedJsonSerializer (Date, BigInt, Map, Set, undefined survive)
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

export interface Idempotency {
  execute<T>(
    request: ExecuteRequest,
    handler: (context: HandlerContext) => Promise<T> | T,
  ): Promise<ExecuteResult<T>>;
  /** The resolved settings, for adapters that build on the engine. */
  readonly settings: IdempotencySettings;
}

export interface IdempotencySettings {
  store: IdempotencyStore;
  leaseMs: number;
  ttlMs: number;
  heartbeatMs: number;
  errorPolicy: ErrorPolicy;
  serializer: Serializer;
  inProgress: 'reject' | Required<InProgressWait>;
  inProgressRetryAfterMs: number;
  clock: Clock;
}

const REPLAYED = Symbol.for('@idem/core/replayed');

/** True for an error that a replay threw: the stored outcome of an earlier attempt. */
export function wasReplayed(error: unknown): boolean {
  return (
    typeof error === 'object' &&
    error !== null &&
    (error as Record<symbol, unknown>)[REPLAYED] === true
  );
}

function positive(name: string, value: number): number {
  if (!Number.isFinite(value) || value <= 0) {
    throw new ConfigurationError(
      `${name} must be a positive number of milliseconds; got ${value}.`,
    );
  }
  return value;
}

/** Checks and fills in the options; throws `ConfigurationError` for a set that cannot work. */
export function resolveSettings(options: IdempotencyOptions): IdempotencySettings {
  if (!options.store) throw new ConfigurationError('createIdempotency needs a `store`.');
  const leaseMs = positive('leaseMs', options.leaseMs ?? 30_000);
  const ttlMs = positive('ttlMs', options.ttlMs ?? 86_400_000);
  const heartbeatMs = positive('heartbeatMs', options.heartbeatMs ?? leaseMs / 3);
  if (heartbeatMs >= leaseMs) {
    throw new ConfigurationError(
      `heartbeatMs (${heartbeatMs}) must be shorter than leaseMs (${leaseMs}), or the lease ` +
        'runs out between two renewals; leaseMs / 3 is a good value.',
    );
  }
  if (ttlMs <= leaseMs) {
    throw new ConfigurationError(
      `ttlMs (${ttlMs}) must be longer than leaseMs (${leaseMs}): a completed key must be ` +
        'remembered for longer than a single attempt may take.',
    );
  }
  if (
    options.retryWindowMs !== undefined &&
    ttlMs < positive('retryWindowMs', options.retryWindowMs)
  ) {
    throw new ConfigurationError(
      `ttlMs (${ttlMs}) is shorter than retryWindowMs (${options.retryWindowMs}): a retry arriving ` +
        'after the record expired would run the work twice. Raise ttlMs to at least retryWindowMs.',
    );
  }
  const wait = options.inProgress ?? 'reject';
  return {
    store: options.store,
    leaseMs,
    ttlMs,
    heartbeatMs,
    errorPolicy: resolveErrorPolicy(options.errorPolicy),
    serializer: options.serializer ?? taggedJsonSerializer,
    inProgress:
      wait === 'reject'
        ? 'reject'
        : {
            waitMs: positive('inProgress.waitMs', wait.waitMs),
            pollMs: positive('inProgress.pollMs', wait.pollMs ?? 50),
          },
    inProgressRetryAfterMs: positive(
      'inProgressRetryAfterMs',
      options.inProgressRetryAfterMs ?? 1_000,
    ),
    clock: options.clock ?? systemClock,
  };
}

/**
 * The claim → run → complete / replay orchestrator (lease mode): the claim commits first,
 * the handler runs under a heartbeat-renewed lease, and the completion is fenced by the
 * claim's version so an attempt that was taken over writes nothing.
 */
export function createIdempotency(options: IdempotencyOptions): Idempotency {
  const settings = resolveSettings(options);
  const { store, leaseMs, ttlMs, errorPolicy, serializer, clock } = settings;

  const emit = (event: IdempotencyEvent) => {
    try {
      options.onEvent?.({ ...event, mode: 'lease' });
    } catch {
      // Observability must never change the outcome of a write.
    }
  };

  const sleep = (ms: number) => new Promise<void>((resolve) => clock.setTimeout(resolve, ms));

  async function claimUntilDecided(
    request: ExecuteRequest,
    fingerprint: string,
    startedAt: number,
  ) {
    const deadline =
      settings.inProgress === 'reject' ? startedAt : startedAt + settings.inProgress.waitMs;
    for (;;) {
      const sentAt = clock.monotonicNow();
      const result = await store.claim({
        scope: request.scope,
        key: request.key,
        fingerprint,
        leaseMs,
        ttlMs,
      });
      if (result.status !== 'in_progress' || settings.inProgress === 'reject') {
        return { ...result, sentAt };
      }
      const left = deadline - clock.monotonicNow();
      if (left <= 0) return { ...result, sentAt };
      await sleep(Math.min(left, settings.inProgress.pollMs, Math.max(1, result.retryAfterMs)));
    }
  }

  function replay<T>(record: IdempotencyRecord): ExecuteResult<T> {
    const outcome = record.outcome!;
    if (outcome.kind === 'success') {
      return {
        value: serializer.deserialize(outcome.value) as T,
        replayed: true,
        version: record.version,
      };
    }
    const error = errorPolicy.fromStored(outcome.error, serializer);
    if (typeof error === 'object' && error !== null) {
      Object.defineProperty(error, REPLAYED, { value: true, enumerable: false });
    }
    throw error;
  }

  type Base = { scope: string; key: string; version: number };

  /** Settles the key with `error` as its outcome, replayed to every retry. Fenced. */
  async function completeWithError(
    token: LeaseToken,
    error: unknown,
    base: Base,
    durationMs: () => number,
    unstorable?: unknown,
  ) {
    const { stored, refused } = storedErrorOf(errorPolicy, error, serializer);
    await completeOrLose(token, { kind: 'error', error: stored }, base, durationMs);
    const event: IdempotencyEvent = { type: 'completed', ...base, durationMs: durationMs(), error };
    if (unstorable !== undefined || refused !== undefined) event.unstorable = unstorable ?? refused;
    emit(event);
  }

  /**
   * Work that ran but whose result the serializer refuses. Releasing the key would run the
   * side effects again on the retry, so the key is settled with this error instead.
   */
  async function settleUnstorable(
    token: LeaseToken,
    subject: string,
    cause: unknown,
    base: Base,
    durationMs: () => number,
  ): Promise<UnserializableValueError> {
    const error = new UnserializableValueError(
      isUnserializableValueError(cause) ? cause.path : '',
      `${subject} ran, but its result could not be stored, so this error is the outcome of ` +
        `key "${base.key}": a retry with the same key gets it again and runs nothing. ` +
        `${cause instanceof Error ? cause.message : String(cause)}`,
      { cause },
    );
    await completeWithError(token, error, base, durationMs, cause);
    return error;
  }

  async function run<T>(
    claim: Extract<ClaimResult, { status: 'claimed' }> & { sentAt: number },
    handler: (context: HandlerContext) => Promise<T> | T,
    durationMs: () => number,
  ): Promise<ExecuteResult<T>> {
    const { record } = claim;
    const token = leaseTokenOf(record);
    const steps: Record<string, JsonValue> = { ...record.steps };
    const base: Base = { scope: record.scope, key: record.key, version: record.version };
    const lease = startLease({
      store,
      token,
      leaseMs,
      heartbeatMs: settings.heartbeatMs,
      clock,
      claimedAt: claim.sentAt,
    });
    // Set once a recovery point settled the key (its result could not be stored): from then
    // on the key's outcome is this error, whatever the handler does after catching it.
    let settled: { error: unknown } | undefined;

    const context: HandlerContext = {
      key: record.key,
      scope: record.scope,
      signal: lease.signal,
      attempt: record.attempts,
      version: record.version,
      takeover: claim.takeover,
      deriveKey: (suffix) => deriveKey(record.scope, record.key, suffix),
      async step<S>(name: string, fn: () => Promise<S> | S): Promise<S> {
        if (settled) throw settled.error;
        if (Object.hasOwn(steps, name)) return serializer.deserialize(steps[name]!) as S;
        // A holder that was paused past its lease must not start new side effects: another
        // attempt may already own the key.
        lease.assertHeld();
        const value = await fn();
        let json: JsonValue;
        try {
          json = serializer.serialize(value);
        } catch (cause) {
          lease.stop();
          try {
            settled = {
              error: await settleUnstorable(
                token,
                `The recovery point "${name}"`,
                cause,
                base,
                durationMs,
              ),
            };
          } catch (error) {
            settled = { error };
          }
          throw settled.error;
        }
        await store.saveStep(token, name, json);
        steps[name] = json;
        return value;
      },
    };

    let value: T;
    try {
      value = await handler(context);
    } catch (error) {
      lease.stop();
      if (settled) throw settled.error;
      if (isLeaseLostError(error)) {
        emit({ type: 'lease_lost', ...base, durationMs: durationMs(), error });
        throw error;
      }
      if (errorPolicy.classify(error) === 'store') {
        await completeWithError(token, error, base, durationMs);
      } else {
        try {
          await store.release(token);
          emit({ type: 'released', ...base, durationMs: durationMs(), error });
        } catch (releaseError) {
          if (!isLeaseLostError(releaseError)) throw releaseError;
          emit({ type: 'lease_lost', ...base, durationMs: durationMs(), error: releaseError });
        }
      }
      throw error;
    }
    lease.stop();
    if (settled) throw settled.error;
    let json: JsonValue;
    try {
      json = serializer.serialize(value);
    } catch (cause) {
      throw await settleUnstorable(token, 'The procedure', cause, base, durationMs);
    }
    await completeOrLose(token, { kind: 'success', value: json }, base, durationMs);
    emit({ type: 'completed', ...base, durationMs: durationMs() });
    return { value, replayed: false, version: record.version };
  }

  async function completeOrLose(
    token: LeaseToken,
    outcome: Parameters<IdempotencyStore['complete']>[1],
    base: Base,
    durationMs: () => number,
  ) {
    try {
      await store.complete(token, outcome, ttlMs);
    } catch (error) {
      if (isLeaseLostError(error))
        emit({ type: 'lease_lost', ...base, durationMs: durationMs(), error });
      throw error;
    }
  }

  return {
    settings,
    async execute<T>(
      request: ExecuteRequest,
      handler: (context: HandlerContext) => Promise<T> | T,
    ): Promise<ExecuteResult<T>> {
      const startedAt = clock.monotonicNow();
      const durationMs = () => clock.monotonicNow() - startedAt;
      if (typeof request.scope !== 'string' || request.scope.length === 0) {
        throw new ConfigurationError(
          'execute() needs a non-empty `scope` naming who is asking and for what (e.g. "user:42/orders.create").',
        );
      }
      validateKey(request.key);
      const fingerprint = request.fingerprint ?? (await fingerprintOf(request.input));
      const claim = await claimUntilDecided(request, fingerprint, startedAt);
      const base = { scope: request.scope, key: request.key, version: claim.record.version };

      switch (claim.status) {
        case 'replay':
          emit({ type: 'replayed', ...base, durationMs: durationMs() });
          return replay<T>(claim.record);
        case 'mismatch':
          emit({ type: 'mismatch', ...base, durationMs: durationMs() });
          throw new KeyMismatchError(request.scope, request.key);
        case 'in_progress':
          emit({ type: 'in_progress', ...base, durationMs: durationMs() });
          throw new RequestInProgressError(
            request.scope,
            request.key,
            Math.min(claim.retryAfterMs, settings.inProgressRetryAfterMs),
          );
        case 'claimed':
          emit({
            type: claim.takeover ? 'takeover' : 'claimed',
            ...base,
            durationMs: durationMs(),
          });
          return run(claim, handler, durationMs);
      }
    },
  };
}
