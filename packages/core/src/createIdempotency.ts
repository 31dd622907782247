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
  Attempt,
  ExecuteRequest,
  ExecuteResult,
  HandlerContext,
  Idempotency,
  RunResult,
} from './Idempotency.js';
import type {
  IdempotencyEvent,
  IdempotencyEventType,
  IdempotencyOptions,
  InProgressWait,
} from './IdempotencyOptions.js';
import { LeaseKeeper } from './lease.js';
import { notifyObserver } from './notifyObserver.js';
import { resolveSettings } from './resolveSettings.js';
import type { ClaimRequest, ClaimResult, IdempotencyStore } from './store/IdempotencyStore.js';
import type { IdempotencyRecord, JsonValue } from './store/record.js';
import { validateKey } from './validateKey.js';

export { wasReplayed } from './answerClaim.js';

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

  /** What a lost lease answers: nothing more is written, another attempt owns the key. */
  const lost = (record: IdempotencyRecord, error: unknown, startedAt: number) => {
    emit('lease_lost', record, startedAt, { error });
    return { ok: false, replayed: false, error } as const;
  };

  /** Runs the handler of a claimed key under its lease, and settles the key by its outcome. */
  async function attempt<T>(
    claim: Extract<ClaimResult, { status: 'claimed' }>,
    claimedAt: number,
    handler: (context: HandlerContext) => Promise<Attempt<T>>,
    startedAt: number,
  ): Promise<RunResult<T>> {
    // The record names the incarnation it was claimed as: it is its own lease token.
    const lease = leases.start(claim.record, claimedAt);
    const context = new AttemptContext(host, claim, lease, startedAt);
    let outcome: Attempt<T>;
    try {
      outcome = await handler(context);
    } catch (error) {
      outcome = { ok: false, error };
    }
    lease.stop();
    const settledBy = AttemptContext.settledBy(context);
    if (settledBy) return { ok: false, replayed: false, error: settledBy.error };
    if (!outcome.ok) return failed(claim.record, outcome.error, startedAt);
    return succeeded(claim.record, outcome, startedAt);
  }

  /** A failure: stored as the key's outcome, or the key freed, as the error policy says. */
  async function failed(
    record: IdempotencyRecord,
    error: unknown,
    startedAt: number,
  ): Promise<RunResult<never>> {
    if (isLeaseLostError(error)) return lost(record, error, startedAt);
    if (errorPolicy.classify(error) === 'store') {
      try {
        await completeWithError(record, error, startedAt);
      } catch (completeError) {
        if (isLeaseLostError(completeError))
          return { ok: false, replayed: false, error: completeError };
        throw completeError;
      }
    } else {
      try {
        await store.release(record);
        emit('released', record, startedAt, { error });
      } catch (releaseError) {
        if (!isLeaseLostError(releaseError)) throw releaseError;
        emit('lease_lost', record, startedAt, { error: releaseError });
      }
    }
    return { ok: false, replayed: false, error };
  }

  /** An answer: stored (fenced by the claim's version) unless it asks to keep nothing. */
  async function succeeded<T>(
    record: IdempotencyRecord,
    outcome: Extract<Attempt<T>, { ok: true }>,
    startedAt: number,
  ): Promise<RunResult<T>> {
    const answered = {
      ok: true,
      replayed: false,
      value: outcome.value,
      version: record.version,
    } as const;
    if (outcome.keep === 'nothing') {
      try {
        await store.release(record);
      } catch (error) {
        if (isLeaseLostError(error)) return lost(record, error, startedAt);
        throw error;
      }
      emit('released', record, startedAt);
      return answered;
    }
    let json: JsonValue;
    try {
      json = serializer.serialize('stored' in outcome ? outcome.stored : outcome.value);
    } catch (cause) {
      try {
        const error = await settleUnstorable(record, 'The procedure', cause, startedAt);
        return { ok: false, replayed: false, error };
      } catch (error) {
        if (isLeaseLostError(error)) return { ok: false, replayed: false, error };
        throw error;
      }
    }
    try {
      await store.complete(record, { kind: 'success', value: json }, ttlMs);
    } catch (error) {
      if (isLeaseLostError(error)) return lost(record, error, startedAt);
      throw error;
    }
    emit('completed', record, startedAt);
    return answered;
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

  async function run<T>(
    request: ExecuteRequest,
    handler: (context: HandlerContext) => Promise<Attempt<T>>,
  ): Promise<RunResult<T>> {
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
      return answerClaim(claim, settings, (type) => emit(type, record, startedAt));
    }
    emit(claim.takeover ? 'takeover' : 'claimed', claim.record, startedAt);
    // `return await`: awaiting a native promise costs fewer ticks than adopting it.
    return await attempt(claim, claimedAt, handler, startedAt);
  }

  return {
    settings,
    run,
    async execute<T>(
      request: ExecuteRequest,
      handler: (context: HandlerContext) => Promise<T> | T,
    ): Promise<ExecuteResult<T>> {
      const result = await run<T>(request, async (context) => {
        try {
          return { ok: true, value: await handler(context) };
        } catch (error) {
          return { ok: false, error };
        }
      });
      if (!result.ok) throw result.error;
      return { value: result.value as T, replayed: result.replayed, version: result.version };
    },
  };
}
