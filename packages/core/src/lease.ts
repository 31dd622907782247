import type { Clock, TimerHandle } from './Clock.js';
import { isLeaseLostError, LeaseLostError } from './errors/LeaseLostError.js';
import type { IdempotencyStore } from './IdempotencyStore.js';
import type { LeaseToken } from './record.js';

export interface LeaseOptions {
  store: IdempotencyStore;
  token: LeaseToken;
  leaseMs: number;
  heartbeatMs: number;
  clock: Clock;
  /**
   * When the claim that granted the lease was sent, by `clock.monotonicNow()`: the lease
   * may have started any time after that, so the holder counts from there to stay on the
   * safe side.
   */
  claimedAt: number;
}

export interface Lease {
  /** Aborted, with a `LeaseLostError` as reason, once the lease is gone or cannot be trusted. */
  signal: AbortSignal;
  /**
   * Throws `LeaseLostError` when the lease is lost or, by this process's monotonic clock,
   * may have run out since the last renewal.
   */
  assertHeld(): void;
  /** Stops renewing. */
  stop(): void;
}

/**
 * Keeps a claim's lease alive while its handler runs. The signal aborts when the store says
 * another attempt took over, and also when renewals kept failing (the database is
 * unreachable) until the lease may have run out: past that point another attempt may
 * legitimately hold the key, so this one must stop. The holder measures that on the
 * monotonic clock: a wall clock stepped back (an NTP correction) would otherwise keep a
 * holder that lost its key running side effects.
 */
export function startLease({
  store,
  token,
  leaseMs,
  heartbeatMs,
  clock,
  claimedAt,
}: LeaseOptions): Lease {
  const controller = new AbortController();
  let renewedAt = claimedAt;
  let inFlight = false;
  let stopped = false;
  let lastError: unknown;
  let timer: TimerHandle | undefined;

  const lose = (error: LeaseLostError) => {
    stopped = true;
    if (timer !== undefined) clock.clearTimeout(timer);
    controller.abort(error);
  };

  const tick = () => {
    if (stopped) return;
    if (clock.monotonicNow() >= renewedAt + leaseMs) {
      lose(new LeaseLostError(token.scope, token.key, token.version, { cause: lastError }));
      return;
    }
    if (!inFlight) {
      inFlight = true;
      const sentAt = clock.monotonicNow();
      store.heartbeat(token, leaseMs).then(
        () => {
          inFlight = false;
          renewedAt = sentAt;
        },
        (error: unknown) => {
          inFlight = false;
          if (stopped) return;
          if (isLeaseLostError(error)) lose(error);
          else lastError = error;
        },
      );
    }
    timer = clock.setTimeout(tick, heartbeatMs);
  };
  timer = clock.setTimeout(tick, heartbeatMs);

  return {
    signal: controller.signal,
    assertHeld() {
      if (!controller.signal.aborted && clock.monotonicNow() >= renewedAt + leaseMs) {
        lose(new LeaseLostError(token.scope, token.key, token.version, { cause: lastError }));
      }
      controller.signal.throwIfAborted();
    },
    stop() {
      stopped = true;
      if (timer !== undefined) clock.clearTimeout(timer);
    },
  };
}
