import { AttemptContext } from './AttemptContext.js';
import { AttemptSettler } from './AttemptSettler.js';
import { answerClaim } from './answerClaim.js';
import { type Emit, eventEmitter } from './engineEvents.js';
import { ConfigurationError } from './errors/ConfigurationError.js';
import { fingerprintNow } from './fingerprint.js';
import type {
  Attempt,
  ExecuteRequest,
  ExecuteResult,
  HandlerContext,
  Idempotency,
  RunResult,
} from './Idempotency.js';
import type { IdempotencyOptions, InProgressWait } from './IdempotencyOptions.js';
import { LeaseKeeper } from './lease.js';
import { type IdempotencySettings, resolveSettings } from './resolveSettings.js';
import type { ClaimResult } from './store/IdempotencyStore.js';
import type { ClaimRequest } from './store/record.js';
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
  return new LeaseEngine(settings, eventEmitter(options.onEvent, settings.clock));
}

/** A claimed key, and when its claim was sent (its lease is counted from then). */
type Claimed = { claim: Extract<ClaimResult, { status: 'claimed' }>; claimedAt: number };

class LeaseEngine implements Idempotency {
  readonly settings: IdempotencySettings;
  readonly #leases: LeaseKeeper;
  readonly #settler: AttemptSettler;
  readonly #emit: Emit;

  constructor(settings: IdempotencySettings, emit: Emit) {
    const { store, leaseMs, heartbeatMs, clock } = settings;
    this.settings = settings;
    this.#emit = emit;
    this.#leases = new LeaseKeeper({ store, leaseMs, heartbeatMs, clock });
    this.#settler = new AttemptSettler(settings, emit);
  }

  // Own properties, not prototype methods: an app may take them apart (`const { run } = …`).
  readonly run = async <T>(
    request: ExecuteRequest,
    handler: (context: HandlerContext) => Promise<Attempt<T>>,
  ): Promise<RunResult<T>> => {
    const { clock } = this.settings;
    const startedAt = clock.monotonicNow();
    const claimed = await this.#claim(request, startedAt);
    if (!('claimedAt' in claimed)) {
      // Events name the record the claim answered with: same scope and key, its version.
      const { record } = claimed;
      return answerClaim(claimed, this.settings, (type) => this.#emit(type, record, startedAt));
    }
    const { claim } = claimed;
    this.#emit(claim.takeover ? 'takeover' : 'claimed', claim.record, startedAt);
    // `return await`: awaiting a native promise costs fewer ticks than adopting it.
    return await this.#attempt(claimed, handler, startedAt);
  };

  readonly execute = async <T>(
    request: ExecuteRequest,
    handler: (context: HandlerContext) => Promise<T> | T,
  ): Promise<ExecuteResult<T>> => {
    const result = await this.run<T>(request, async (context) => {
      try {
        return { ok: true, value: await handler(context) };
      } catch (error) {
        return { ok: false, error };
      }
    });
    if (!result.ok) throw result.error;
    return { value: result.value as T, replayed: result.replayed, version: result.version };
  };

  /** Claims the key (waiting for a live holder where `inProgress` says so). */
  async #claim(
    request: ExecuteRequest,
    startedAt: number,
  ): Promise<Claimed | Exclude<ClaimResult, { status: 'claimed' }>> {
    const { scope, key } = request;
    if (typeof scope !== 'string' || scope.length === 0) {
      throw new ConfigurationError(
        'execute() needs a non-empty `scope` naming who is asking and for what (e.g. "user:42/orders.create").',
      );
    }
    validateKey(key);
    let fingerprint = request.fingerprint ?? fingerprintNow(request.input);
    if (typeof fingerprint !== 'string') fingerprint = await fingerprint;
    const { leaseMs, ttlMs, inProgress } = this.settings;
    const claimRequest: ClaimRequest = { scope, key, fingerprint, leaseMs, ttlMs };
    // The lease is counted from when this call started, a little before the claim was
    // sent: the holder's view of its lease errs on the short side, as it must.
    let claimedAt = startedAt;
    let claim = await this.settings.store.claim(claimRequest);
    if (claim.status === 'in_progress' && inProgress !== 'reject') {
      const waited = await this.#waitForHolder(claimRequest, claim, inProgress, startedAt);
      claim = waited.claim;
      if (claim.status === 'claimed') claimedAt = waited.sentAt;
    }
    return claim.status === 'claimed' ? { claim, claimedAt } : claim;
  }

  /**
   * `inProgress: { waitMs }`: claims again until the holder finished or the wait is over.
   * Returns the last answer and when its claim was sent (a lease starts after that).
   */
  async #waitForHolder(
    request: ClaimRequest,
    first: Extract<ClaimResult, { status: 'in_progress' }>,
    wait: Required<InProgressWait>,
    startedAt: number,
  ): Promise<{ claim: ClaimResult; sentAt: number }> {
    const { clock, store } = this.settings;
    const deadline = startedAt + wait.waitMs;
    let claim: ClaimResult = first;
    let sentAt = 0;
    for (;;) {
      const left = deadline - clock.monotonicNow();
      if (claim.status !== 'in_progress' || left <= 0) return { claim, sentAt };
      const pauseMs = Math.min(left, wait.pollMs, Math.max(1, claim.retryAfterMs));
      await new Promise<void>((resolve) => clock.setTimeout(resolve, pauseMs));
      sentAt = clock.monotonicNow();
      claim = await store.claim(request);
    }
  }

  /** Runs the handler of a claimed key under its lease, and settles the key by its outcome. */
  async #attempt<T>(
    { claim, claimedAt }: Claimed,
    handler: (context: HandlerContext) => Promise<Attempt<T>>,
    startedAt: number,
  ): Promise<RunResult<T>> {
    // The record names the incarnation it was claimed as: it is its own lease token.
    const lease = this.#leases.start(claim.record, claimedAt);
    const context = new AttemptContext(this.#settler, claim, lease, startedAt);
    let outcome: Attempt<T>;
    try {
      outcome = await handler(context);
    } catch (error) {
      outcome = { ok: false, error };
    }
    lease.stop();
    const settledBy = AttemptContext.settledBy(context);
    if (settledBy) return { ok: false, replayed: false, error: settledBy.error };
    // The store failed under a recovery point: thrown, as a failed claim or completion is.
    // The key stays claimed until its lease ends; a retry then takes it over and resumes
    // from the recovery points that were saved.
    const storeFailed = outcome.ok
      ? undefined
      : AttemptContext.failedByStore(context, outcome.error);
    if (storeFailed) throw storeFailed.error;
    if (!outcome.ok) return this.#settler.failed(claim.record, outcome.error, startedAt);
    return this.#settler.succeeded(claim.record, outcome, startedAt);
  }
}
