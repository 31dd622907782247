import type { LeaseToken } from '@idem/core/store';
import { isConnectionError } from './connectionError.js';

/**
 * The pauses before each further try of a fenced write whose connection was lost: five
 * tries in all, 0.8 s of pauses. Short, because the request waits on them; more than two,
 * because postgres.js hands the error of a killed backend to the first statement of the
 * connection it reopens, so the second try may meet that stale error before the third goes
 * through.
 */
export const LOST_CONNECTION_PAUSES_MS: readonly number[] = [25, 75, 200, 500];

/**
 * When the leases a store granted end, as far as that store knows: a claim grants
 * `leaseMs` from when it was sent, and so does each heartbeat that went through, measured
 * on the monotonic clock `monotonicNow`. Keyed by the token object itself (the record a
 * claim returned, which the engine presents to every fenced write of that attempt), weakly,
 * so a settled attempt leaves nothing behind.
 */
export class GrantedLeases {
  readonly #endsAt = new WeakMap<LeaseToken, number>();
  readonly #monotonicNow: () => number;

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
}

/**
 * Runs `write` (a fenced write of `token`'s holder), and again on another connection when
 * it failed because its connection was lost (`isConnectionError`): after each pause of
 * {@link LOST_CONNECTION_PAUSES_MS}, as long as the lease `leases` granted `token` lasts
 * past the pause (a token it never saw gets the tries alone). A pool hands the next try a
 * fresh connection; a single-connection driver reconnects for it. `write` learns whether
 * it is a retry: an earlier try may have committed before its reply was lost.
 *
 * Every try is fenced by the token's version, like the first: one that arrives after
 * another attempt took the key over changes nothing. Once the tries or the lease are
 * spent, the last connection error is thrown (the request is answered 500 and the key is
 * left to its lease); any other error is thrown at once.
 */
export async function retryLostConnection<T>(
  leases: GrantedLeases,
  token: LeaseToken,
  write: (retry: boolean) => Promise<T>,
): Promise<T> {
  for (let tries = 0; tries < LOST_CONNECTION_PAUSES_MS.length; tries++) {
    const pauseMs = LOST_CONNECTION_PAUSES_MS[tries] ?? 0;
    try {
      return await write(tries > 0);
    } catch (error) {
      const leftMs = leases.leftMs(token);
      if (!isConnectionError(error) || (leftMs !== undefined && leftMs <= pauseMs)) throw error;
    }
    await new Promise<void>((resolve) => setTimeout(resolve, pauseMs));
  }
  return write(true);
}
