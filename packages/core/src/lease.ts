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
export function startLease(options: LeaseOptions): Lease {
  return new HeartbeatLease(options);
}

/**
 * One object per held key, its methods on the prototype; the `AbortController` is made
 * only when the handler reads `signal`, which most never do.
 */
class HeartbeatLease implements Lease {
  private readonly options: LeaseOptions;
  private renewedAt: number;
  private inFlight = false;
  private stopped = false;
  private lastError: unknown;
  private timer: TimerHandle | undefined;
  private controller: AbortController | undefined;
  /** Why the lease was lost, once it was. */
  private lost: LeaseLostError | undefined;

  constructor(options: LeaseOptions) {
    this.options = options;
    this.renewedAt = options.claimedAt;
    this.timer = options.clock.setTimeout(this.tick, options.heartbeatMs);
  }

  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.lost) this.controller.abort(this.lost);
    }
    return this.controller.signal;
  }

  assertHeld(): void {
    if (!this.lost && this.options.clock.monotonicNow() >= this.renewedAt + this.options.leaseMs) {
      this.lose(this.expired());
    }
    if (this.lost) throw this.lost;
  }

  stop(): void {
    this.stopped = true;
    if (this.timer !== undefined) this.options.clock.clearTimeout(this.timer);
  }

  private expired(): LeaseLostError {
    const { token } = this.options;
    return new LeaseLostError(token.scope, token.key, token.version, { cause: this.lastError });
  }

  private lose(error: LeaseLostError): void {
    this.stop();
    this.lost = error;
    this.controller?.abort(error);
  }

  private readonly tick = (): void => {
    if (this.stopped) return;
    const { store, token, leaseMs, heartbeatMs, clock } = this.options;
    if (clock.monotonicNow() >= this.renewedAt + leaseMs) {
      this.lose(this.expired());
      return;
    }
    if (!this.inFlight) {
      this.inFlight = true;
      const sentAt = clock.monotonicNow();
      store.heartbeat(token, leaseMs).then(
        () => {
          this.inFlight = false;
          this.renewedAt = sentAt;
        },
        (error: unknown) => {
          this.inFlight = false;
          if (this.stopped) return;
          if (isLeaseLostError(error)) this.lose(error);
          else this.lastError = error;
        },
      );
    }
    this.timer = clock.setTimeout(this.tick, heartbeatMs);
  };
}
