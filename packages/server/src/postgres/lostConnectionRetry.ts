import type { LeaseToken } from '@idem/core/store';
import { isConnectionError, reachedReadOnlyServer } from './connectionError.js';

/**
 * The pauses before each further try of a fenced write whose connection was lost: five
 * tries in all, 0.8 s of pauses. Short, because the request waits on them; more than two,
 * because postgres.js hands the error of a killed backend to the first statement of the
 * connection it reopens, so the second try may meet that stale error before the third goes
 * through.
 */
export const LOST_CONNECTION_PAUSES_MS: readonly number[] = [25, 75, 200, 500];

/**
 * The error a fenced write ends with when it has not settled by the time its lease ends:
 * its connection hangs (postgres.js with `target_session_attrs=primary` waits for a primary
 * as long as none is reachable), and the request must not outlive the lease waiting on it.
 * The request is answered as a store failure. Safe: the write is fenced, so if it still
 * lands it only settles the key its own holder claimed (a retry replays it), and one that
 * lands after another attempt took the key over changes nothing.
 */
export class WritePastLeaseError extends Error {
  readonly code = 'WRITE_PAST_LEASE';

  constructor(scope: string, key: string, what = 'a write') {
    super(
      `${what} of idempotency key "${key}" (scope "${scope}") did not settle before its ` +
        'lease ended, so the request stops waiting on it; is the database reachable ' +
        '(during a failover, is a primary up yet)? A retry with the same key replays the ' +
        'write if it landed late, and runs the key again if not',
    );
    this.name = 'WritePastLeaseError';
  }
}

/**
 * The least time a bounded write (or claim) gets from when it is sent, even when its lease
 * ends sooner or has already ended: the bound is there to stop waiting on a statement that
 * never settles, not to decide the write's answer. A holder that resumes after its lease
 * lapsed still sends its fenced write and hears what the store says (its completion, or
 * `LeaseLostError` after a takeover), and a short lease on a loaded machine is not cut off.
 */
export const MIN_WRITE_WAIT_MS = 5_000;

/** A write waiting on its deadline: when its lease ends, and how to fail it then. */
interface Pending {
  endsAt: number;
  fail(): void;
}

/**
 * When the leases a store granted end, as far as that store knows: a claim grants
 * `leaseMs` from when it was sent, and so does each heartbeat that went through, measured
 * on the monotonic clock `monotonicNow`. Keyed by the token object itself (the record a
 * claim returned, which the engine presents to every fenced write of that attempt), weakly,
 * so a settled attempt leaves nothing behind.
 *
 * It also bounds the writes of those leases (`withinLease`) with one timer for all of them,
 * armed at the earliest end among the writes pending: a write costs no timer of its own,
 * and while writes settle within their leases the one timer fires about once a lease.
 */
export class GrantedLeases {
  readonly #endsAt = new WeakMap<LeaseToken, number>();
  readonly #monotonicNow: () => number;
  readonly #pending = new Set<Pending>();
  #timer: ReturnType<typeof setTimeout> | undefined;
  #timerAt = Number.POSITIVE_INFINITY;

  constructor(monotonicNow: () => number) {
    this.#monotonicNow = monotonicNow;
  }

  now(): number {
    return this.#monotonicNow();
  }

  /** A statement sent at `sentAt` gave `token` a lease of `leaseMs`. */
  granted(token: LeaseToken, sentAt: number, leaseMs: number): void {
    const endsAt = sentAt + leaseMs;
    if (endsAt > (this.#endsAt.get(token) ?? Number.NEGATIVE_INFINITY)) {
      this.#endsAt.set(token, endsAt);
    }
  }

  /** How long the lease of `token` lasts yet; `undefined` for a token this store never saw. */
  leftMs(token: LeaseToken): number | undefined {
    const endsAt = this.#endsAt.get(token);
    return endsAt === undefined ? undefined : endsAt - this.#monotonicNow();
  }

  /**
   * `write`, unless the lease of `token` ends first: then a {@link WritePastLeaseError}
   * (the write is left to land or fail on its own). A token this store never saw has no
   * bound. The end is read when the write starts: a heartbeat that lands meanwhile does
   * not extend it.
   */
  withinLease<T>(token: LeaseToken, write: Promise<T>): Promise<T> {
    const endsAt = this.#endsAt.get(token);
    if (endsAt === undefined) return write;
    return this.within(endsAt, write, () => new WritePastLeaseError(token.scope, token.key));
  }

  /**
   * `work`, unless the monotonic time `endsAt` comes first (but never sooner than
   * {@link MIN_WRITE_WAIT_MS} from now): then the error `late` makes.
   */
  within<T>(endsAt: number, work: Promise<T>, late: () => Error): Promise<T> {
    const deadline = Math.max(endsAt, this.#monotonicNow() + MIN_WRITE_WAIT_MS);
    return new Promise<T>((resolve, reject) => {
      const pending: Pending = { endsAt: deadline, fail: () => reject(late()) };
      this.#pending.add(pending);
      this.#arm(deadline);
      // Settled in place rather than through a `finally`: every claim and fenced write passes
      // here, and each promise a chain adds is one more microtask per statement.
      work.then(
        (value) => {
          this.#pending.delete(pending);
          resolve(value);
        },
        (error: unknown) => {
          this.#pending.delete(pending);
          reject(error);
        },
      );
    });
  }

  /** Makes the one timer fire by `endsAt`. */
  #arm(endsAt: number): void {
    if (endsAt >= this.#timerAt) return;
    clearTimeout(this.#timer);
    this.#timerAt = endsAt;
    this.#timer = setTimeout(() => this.#expire(), Math.max(0, endsAt - this.#monotonicNow()));
    this.#timer.unref?.();
  }

  /** Fails the writes whose lease ended, and arms the timer for the next end. */
  #expire(): void {
    this.#timer = undefined;
    this.#timerAt = Number.POSITIVE_INFINITY;
    const now = this.#monotonicNow();
    let next = Number.POSITIVE_INFINITY;
    for (const pending of this.#pending) {
      if (pending.endsAt <= now) {
        this.#pending.delete(pending);
        pending.fail();
      } else {
        next = Math.min(next, pending.endsAt);
      }
    }
    if (next !== Number.POSITIVE_INFINITY) this.#arm(next);
  }
}

/**
 * Runs `write` (a fenced write of `token`'s holder), and again on another connection when
 * it failed because its connection was lost (`isConnectionError`) or reached a server that
 * takes no writes (`reachedReadOnlyServer`: a standby not yet promoted): after each pause
 * of {@link LOST_CONNECTION_PAUSES_MS}, as long as the lease `leases` granted `token` lasts
 * past the pause (a token it never saw gets the tries alone). A pool hands the next try a
 * fresh connection; a single-connection driver reconnects for it. `write` learns whether
 * it is a retry: an earlier try may have committed before its reply was lost.
 *
 * Every try is fenced by the token's version, like the first: one that arrives after
 * another attempt took the key over changes nothing. Every try is also bounded by the
 * lease (`GrantedLeases.withinLease`): one still pending when it ends fails with a
 * {@link WritePastLeaseError}, so no request outlives its lease waiting on the store. Once
 * the tries or the lease are spent, the last error is thrown (the request is answered 500
 * and the key is left to its lease); any other error is thrown at once.
 */
export async function retryLostConnection<T>(
  leases: GrantedLeases,
  token: LeaseToken,
  write: (retry: boolean) => Promise<T>,
): Promise<T> {
  for (let tries = 0; tries < LOST_CONNECTION_PAUSES_MS.length; tries++) {
    const pauseMs = LOST_CONNECTION_PAUSES_MS[tries] ?? 0;
    try {
      return await leases.withinLease(token, write(tries > 0));
    } catch (error) {
      const leftMs = leases.leftMs(token);
      const elsewhere = isConnectionError(error) || reachedReadOnlyServer(error);
      if (!elsewhere || (leftMs !== undefined && leftMs <= pauseMs)) throw error;
    }
    await new Promise<void>((resolve) => setTimeout(resolve, pauseMs));
  }
  return leases.withinLease(token, write(true));
}
