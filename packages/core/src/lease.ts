import type { Clock, TimerHandle } from './Clock.js';
import { isLeaseLostError, LeaseLostError } from './errors/LeaseLostError.js';
import type { IdempotencyStore } from './store/IdempotencyStore.js';
import type { LeaseToken } from './store/record.js';

/** What every lease of one engine shares. */
export interface LeaseKeeperOptions {
  store: IdempotencyStore;
  leaseMs: number;
  heartbeatMs: number;
  clock: Clock;
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
 * Keeps claims' leases alive while their handlers run. A lease's signal aborts when the
 * store says another attempt took over, and also when renewals kept failing (the database
 * is unreachable) until the lease may have run out: past that point another attempt may
 * legitimately hold the key, so this one must stop. The holder measures that on the
 * monotonic clock: a wall clock stepped back (an NTP correction) would otherwise keep a
 * holder that lost its key running side effects.
 *
 * One keeper per engine: every lease renews `heartbeatMs` after it started and then every
 * `heartbeatMs`, as if each had its own timer, but the keeper arms one timer for all of
 * them. Leases share `heartbeatMs`, so the order they start in is the order they fall due
 * in: the timer waits for the first, and starting or stopping a lease touches no timer
 * (it links or unlinks the lease in a list).
 * The timer is left armed when the last lease stops (the system clock's timers never keep
 * a process alive); when it fires with nothing due it is armed for the next lease, if any.
 */
export class LeaseKeeper {
  readonly options: LeaseKeeperOptions;
  /** Running leases, in the order they fall due: a doubly linked list through the leases. */
  private first: HeartbeatLease | undefined;
  private last: HeartbeatLease | undefined;
  private timer: TimerHandle | undefined;

  constructor(options: LeaseKeeperOptions) {
    this.options = options;
  }

  /**
   * Starts renewing the lease of `token`, claimed by a request sent at `claimedAt` (by
   * `clock.monotonicNow()`): the lease may have started any time after that, so the holder
   * counts from there to stay on the safe side.
   */
  start(token: LeaseToken, claimedAt: number): Lease {
    const { clock, heartbeatMs } = this.options;
    const lease = new HeartbeatLease(this, token, claimedAt, clock.monotonicNow() + heartbeatMs);
    this.append(lease);
    if (this.timer === undefined) this.timer = clock.setTimeout(this.fire, heartbeatMs);
    return lease;
  }

  /** @internal Unlinks `lease` (a lease not in the list is left alone). */
  remove(lease: HeartbeatLease): void {
    if (!lease.linked) return;
    lease.linked = false;
    if (lease.previous) lease.previous.next = lease.next;
    else this.first = lease.next;
    if (lease.next) lease.next.previous = lease.previous;
    else this.last = lease.previous;
    lease.previous = undefined;
    lease.next = undefined;
  }

  private append(lease: HeartbeatLease): void {
    lease.linked = true;
    lease.previous = this.last;
    if (this.last) this.last.next = lease;
    else this.first = lease;
    this.last = lease;
  }

  private readonly fire = (): void => {
    this.timer = undefined;
    const { clock, heartbeatMs } = this.options;
    const now = clock.monotonicNow();
    const due: HeartbeatLease[] = [];
    for (let lease = this.first; lease && lease.dueAt <= now; lease = lease.next) due.push(lease);
    for (const lease of due) {
      // Renewed leases go to the back: due again a whole interval from now.
      this.remove(lease);
      if (lease.tick(now)) {
        lease.dueAt = now + heartbeatMs;
        this.append(lease);
      }
    }
    if (this.timer === undefined && this.first) {
      this.timer = clock.setTimeout(this.fire, this.first.dueAt - now);
    }
  };
}

/**
 * One object per held key, its methods on the prototype; the `AbortController` is made
 * only when the handler reads `signal`, which most never do.
 */
class HeartbeatLease implements Lease {
  /** When the next renewal is due, by `clock.monotonicNow()`. */
  dueAt: number;
  /** The keeper's list of running leases. */
  linked = false;
  previous: HeartbeatLease | undefined = undefined;
  next: HeartbeatLease | undefined = undefined;
  private readonly keeper: LeaseKeeper;
  private readonly token: LeaseToken;
  private renewedAt: number;
  private inFlight = false;
  private stopped = false;
  private lastError: unknown;
  private controller: AbortController | undefined;
  /** Why the lease was lost, once it was. */
  private lost: LeaseLostError | undefined;

  constructor(keeper: LeaseKeeper, token: LeaseToken, claimedAt: number, dueAt: number) {
    this.keeper = keeper;
    this.token = token;
    this.renewedAt = claimedAt;
    this.dueAt = dueAt;
  }

  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.lost) this.controller.abort(this.lost);
    }
    return this.controller.signal;
  }

  assertHeld(): void {
    const { clock, leaseMs } = this.keeper.options;
    if (!this.lost && clock.monotonicNow() >= this.renewedAt + leaseMs) {
      this.lose(this.expired());
    }
    if (this.lost) throw this.lost;
  }

  stop(): void {
    this.stopped = true;
    this.keeper.remove(this);
  }

  /** A renewal falls due at `now`; false once the lease is no longer renewed. */
  tick(now: number): boolean {
    if (this.stopped) return false;
    const { store, leaseMs, clock } = this.keeper.options;
    if (now >= this.renewedAt + leaseMs) {
      this.lose(this.expired());
      return false;
    }
    if (!this.inFlight) {
      this.inFlight = true;
      const sentAt = clock.monotonicNow();
      store.heartbeat(this.token, leaseMs).then(
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
    return true;
  }

  private expired(): LeaseLostError {
    const { token } = this;
    return new LeaseLostError(token.scope, token.key, token.version, { cause: this.lastError });
  }

  private lose(error: LeaseLostError): void {
    this.stop();
    this.lost = error;
    this.controller?.abort(error);
  }
}
