import { answerClaim } from './answerClaim.js';
import { type Clock, systemClock } from './Clock.js';

export { wasReplayed } from './answerClaim.js';

import { deriveKey } from './deriveKey.js';
import {
  type ErrorPolicy,
  type ErrorPolicyOption,
  resolveErrorPolicy,
  storedErrorOf,
} from './errorPolicy.js';
import { ConfigurationError } from './errors/ConfigurationError.js';
import { isLeaseLostError } from './errors/LeaseLostError.js';
import {
  isUnserializableValueError,
  UnserializableValueError,
} from './errors/UnserializableValueError.js';
import { fingerprintNow } from './fingerprint.js';
import type { ClaimRequest, ClaimResult, IdempotencyStore } from './IdempotencyStore.js';
import { type Lease, LeaseKeeper } from './lease.js';
import { notifyObserver } from './notifyObserver.js';
import type { IdempotencyRecord, JsonValue, LeaseToken } from './record.js';
import { requirePositive } from './requirePositive.js';
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

const positive = (name: string, value: number) =>
  requirePositive(name, value, { unit: 'milliseconds' });

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
 *
 * The request path allocates only what the call needs: options are resolved once here, an
 * event is built only when `onEvent` listens, the lease's `AbortSignal` only when the
 * handler reads it, and the fingerprint is hashed synchronously where `node:crypto` exists.
 * Heartbeats of all the engine's leases share one timer (`LeaseKeeper`), so a call arms
 * and clears none.
 */
export function createIdempotency(options: IdempotencyOptions): Idempotency {
  const settings = resolveSettings(options);
  const { store, leaseMs, ttlMs, heartbeatMs, errorPolicy, serializer, clock } = settings;
  const { onEvent } = options;
  const leases = new LeaseKeeper({ store, leaseMs, heartbeatMs, clock });

  type Base = { scope: string; key: string; version: number };

  /** Reports what happened to a key, when someone listens. */
  const emit = (
    type: IdempotencyEventType,
    base: Base,
    startedAt: number,
    extra?: Pick<IdempotencyEvent, 'error' | 'unstorable'>,
  ) => {
    if (!onEvent) return;
    const event: IdempotencyEvent = {
      type,
      scope: base.scope,
      key: base.key,
      version: base.version,
      durationMs: clock.monotonicNow() - startedAt,
      mode: 'lease',
    };
    if (extra?.error !== undefined) event.error = extra.error;
    if (extra?.unstorable !== undefined) event.unstorable = extra.unstorable;
    notifyObserver(onEvent, event);
  };

  const sleep = (ms: number) => new Promise<void>((resolve) => clock.setTimeout(resolve, ms));

  /**
   * `inProgress: { waitMs }`: claims again until the holder finished or the wait is over.
   * Returns the last answer and when its claim was sent (a lease starts after that).
   */
  async function waitForHolder(
    request: ClaimRequest,
    first: Extract<ClaimResult, { status: 'in_progress' }>,
    wait: Required<InProgressWait>,
    startedAt: number,
  ): Promise<{ claim: ClaimResult; sentAt: number }> {
    const deadline = startedAt + wait.waitMs;
    let claim: ClaimResult = first;
    let sentAt = 0;
    for (;;) {
      const left = deadline - clock.monotonicNow();
      if (claim.status !== 'in_progress' || left <= 0) return { claim, sentAt };
      await sleep(Math.min(left, wait.pollMs, Math.max(1, claim.retryAfterMs)));
      sentAt = clock.monotonicNow();
      claim = await store.claim(request);
    }
  }

  /** Settles the key with `error` as its outcome, replayed to every retry. Fenced. */
  async function completeWithError(
    record: IdempotencyRecord,
    error: unknown,
    startedAt: number,
    unstorable?: unknown,
  ) {
    const { stored, refused } = storedErrorOf(errorPolicy, error, serializer);
    await completeOrLose(record, { kind: 'error', error: stored }, startedAt);
    emit('completed', record, startedAt, { error, unstorable: unstorable ?? refused });
  }

  /**
   * Work that ran but whose result the serializer refuses. Releasing the key would run the
   * side effects again on the retry, so the key is settled with this error instead.
   */
  async function settleUnstorable(
    record: IdempotencyRecord,
    subject: string,
    cause: unknown,
    startedAt: number,
  ): Promise<UnserializableValueError> {
    const error = new UnserializableValueError(
      isUnserializableValueError(cause) ? cause.path : '',
      `${subject} ran, but its result could not be stored, so this error is the outcome of ` +
        `key "${record.key}": a retry with the same key gets it again and runs nothing. ` +
        `${cause instanceof Error ? cause.message : String(cause)}`,
      { cause },
    );
    await completeWithError(record, error, startedAt, cause);
    return error;
  }

  const host: AttemptHost = { store, serializer, settleUnstorable };

  async function run<T>(
    claim: Extract<ClaimResult, { status: 'claimed' }>,
    claimedAt: number,
    handler: (context: HandlerContext) => Promise<T> | T,
    startedAt: number,
  ): Promise<ExecuteResult<T>> {
    const { record } = claim;
    // The record names the incarnation it was claimed as: it is its own lease token.
    const token: LeaseToken = record;
    const lease = leases.start(token, claimedAt);
    const context = new AttemptContext(host, claim, lease, startedAt);

    let value: T;
    try {
      value = await handler(context);
    } catch (error) {
      lease.stop();
      AttemptContext.throwIfSettled(context);
      if (isLeaseLostError(error)) {
        emit('lease_lost', record, startedAt, { error });
        throw error;
      }
      if (errorPolicy.classify(error) === 'store') {
        await completeWithError(record, error, startedAt);
      } else {
        try {
          await store.release(token);
          emit('released', record, startedAt, { error });
        } catch (releaseError) {
          if (!isLeaseLostError(releaseError)) throw releaseError;
          emit('lease_lost', record, startedAt, { error: releaseError });
        }
      }
      throw error;
    }
    lease.stop();
    AttemptContext.throwIfSettled(context);
    let json: JsonValue;
    try {
      json = serializer.serialize(value);
    } catch (cause) {
      throw await settleUnstorable(record, 'The procedure', cause, startedAt);
    }
    // Inline rather than through completeOrLose: one async frame less on every call.
    try {
      await store.complete(token, { kind: 'success', value: json }, ttlMs);
    } catch (error) {
      if (isLeaseLostError(error)) emit('lease_lost', record, startedAt, { error });
      throw error;
    }
    emit('completed', record, startedAt);
    return { value, replayed: false, version: record.version };
  }

  async function completeOrLose(
    record: IdempotencyRecord,
    outcome: Parameters<IdempotencyStore['complete']>[1],
    startedAt: number,
  ) {
    try {
      await store.complete(record, outcome, ttlMs);
    } catch (error) {
      if (isLeaseLostError(error)) emit('lease_lost', record, startedAt, { error });
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
      const { scope, key } = request;
      if (typeof scope !== 'string' || scope.length === 0) {
        throw new ConfigurationError(
          'execute() needs a non-empty `scope` naming who is asking and for what (e.g. "user:42/orders.create").',
        );
      }
      validateKey(key);
      let fingerprint = request.fingerprint ?? fingerprintNow(request.input);
      if (typeof fingerprint !== 'string') fingerprint = await fingerprint;
      const claimRequest: ClaimRequest = { scope, key, fingerprint, leaseMs, ttlMs };
      // The lease is counted from when this call started, a little before the claim was
      // sent: the holder's view of its lease errs on the short side, as it must.
      let claimedAt = startedAt;
      let claim = await store.claim(claimRequest);
      if (claim.status === 'in_progress' && settings.inProgress !== 'reject') {
        const waited = await waitForHolder(claimRequest, claim, settings.inProgress, startedAt);
        claim = waited.claim;
        if (claim.status === 'claimed') claimedAt = waited.sentAt;
      }
      if (claim.status !== 'claimed') {
        // Events name the record the claim answered with: same scope and key, its version.
        const { record } = claim;
        const replayed = answerClaim(claim, settings, (type) => emit(type, record, startedAt));
        if (!replayed.ok) throw replayed.error;
        return { value: replayed.value as T, replayed: true, version: record.version };
      }
      emit(claim.takeover ? 'takeover' : 'claimed', claim.record, startedAt);
      // `return await`: awaiting a native promise costs fewer ticks than adopting it.
      return await run(claim, claimedAt, handler, startedAt);
    },
  };
}

/** What an attempt's recovery points need of their engine. */
interface AttemptHost {
  store: IdempotencyStore;
  serializer: Serializer;
  /** Settles the key with an `UnserializableValueError` for a result that cannot be stored. */
  settleUnstorable(
    record: IdempotencyRecord,
    subject: string,
    cause: unknown,
    startedAt: number,
  ): Promise<UnserializableValueError>;
}

/**
 * The handler's context for one attempt: a class, so that making one per call costs an
 * allocation, not an object literal with an accessor (a runtime call each time). `step`
 * and `deriveKey` are own properties, so a handler may take them apart
 * (`const { step } = ctx`); `signal` is read through the lease, which makes its
 * `AbortController` only when it is read.
 */
class AttemptContext implements HandlerContext {
  readonly key: string;
  readonly scope: string;
  readonly attempt: number;
  readonly version: number;
  readonly takeover: boolean;
  readonly step: HandlerContext['step'];
  readonly deriveKey: (suffix: string) => string;
  readonly #host: AttemptHost;
  readonly #record: IdempotencyRecord;
  readonly #lease: Lease;
  readonly #startedAt: number;
  /**
   * Recovery points saved so far; copied before the first write, so the store's record is
   * never changed under it.
   */
  #steps: Record<string, JsonValue>;
  /**
   * Set once a recovery point settled the key (its result could not be stored): from then
   * on the key's outcome is this error, whatever the handler does after catching it.
   */
  #settled: { error: unknown } | undefined;

  constructor(
    host: AttemptHost,
    claim: Extract<ClaimResult, { status: 'claimed' }>,
    lease: Lease,
    startedAt: number,
  ) {
    const { record } = claim;
    this.key = record.key;
    this.scope = record.scope;
    this.attempt = record.attempts;
    this.version = record.version;
    this.takeover = claim.takeover;
    this.step = (name, fn) => this.#step(name, fn);
    this.deriveKey = (suffix) => deriveKey(record.scope, record.key, suffix);
    this.#host = host;
    this.#record = record;
    this.#lease = lease;
    this.#startedAt = startedAt;
    this.#steps = record.steps;
  }

  get signal(): AbortSignal {
    return this.#lease.signal;
  }

  /**
   * Throws the error a recovery point settled the key with, if one did: the key's outcome
   * is that error, whatever the handler did after catching it.
   */
  static throwIfSettled(context: AttemptContext): void {
    if (context.#settled) throw context.#settled.error;
  }

  async #step<S>(name: string, fn: () => Promise<S> | S): Promise<S> {
    const { store, serializer } = this.#host;
    if (this.#settled) throw this.#settled.error;
    if (Object.hasOwn(this.#steps, name)) {
      return serializer.deserialize(this.#steps[name]!) as S;
    }
    // A holder that was paused past its lease must not start new side effects: another
    // attempt may already own the key.
    this.#lease.assertHeld();
    const value = await fn();
    let json: JsonValue;
    try {
      json = serializer.serialize(value);
    } catch (cause) {
      this.#lease.stop();
      try {
        this.#settled = {
          error: await this.#host.settleUnstorable(
            this.#record,
            `The recovery point "${name}"`,
            cause,
            this.#startedAt,
          ),
        };
      } catch (error) {
        this.#settled = { error };
      }
      throw this.#settled.error;
    }
    await store.saveStep(this.#record, name, json);
    if (this.#steps === this.#record.steps) this.#steps = { ...this.#steps };
    this.#steps[name] = json;
    return value;
  }
}
