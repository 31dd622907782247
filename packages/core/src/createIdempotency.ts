import { AttemptContext, type AttemptHost } from './AttemptContext.js';
import { answerClaim } from './answerClaim.js';
import { storedErrorOf } from './errorPolicy.js';
import { ConfigurationError } from './errors/ConfigurationError.js';
import { isLeaseLostError } from './errors/LeaseLostError.js';
import {
  isUnserializableValueError,
  UnserializableValueError,
} from './errors/UnserializableValueError.js';
import { fingerprintNow } from './fingerprint.js';
import type {
  IdempotencyEvent,
  IdempotencyEventType,
  IdempotencyOptions,
  InProgressWait,
} from './IdempotencyOptions.js';
import type { ClaimRequest, ClaimResult, IdempotencyStore } from './IdempotencyStore.js';
import { LeaseKeeper } from './lease.js';
import { notifyObserver } from './notifyObserver.js';
import type { IdempotencyRecord, JsonValue, LeaseToken } from './record.js';
import { type IdempotencySettings, resolveSettings } from './resolveSettings.js';
import { validateKey } from './validateKey.js';

export { wasReplayed } from './answerClaim.js';

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
