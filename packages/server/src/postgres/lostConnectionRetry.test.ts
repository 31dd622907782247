import { LeaseLostError } from '@idem/core';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { isConnectionError } from './connectionError.js';
import {
  GrantedLeases,
  LOST_CONNECTION_PAUSES_MS,
  MIN_WRITE_WAIT_MS,
  retryLostConnection,
  WritePastLeaseError,
} from './lostConnectionRetry.js';

/** The error postgres.js gives a statement whose backend was terminated. */
const terminated = () =>
  Object.assign(new Error('terminating connection due to administrator command'), {
    code: '57P01',
  });
/** The error of a write that reached a standby (not yet promoted): the session stays open. */
const readOnly = () =>
  Object.assign(new Error('cannot execute UPDATE in a read-only transaction'), {
    code: '25006',
  });
/** A write whose statement never settles (a pool waiting for a primary that is not there). */
const hanging = () => new Promise<never>(() => {});
const token = () => ({ scope: 'provider:test', key: 'evt_1', version: 1, createdAt: 0 });

/** Runs `retryLostConnection` over a write that fails with `errors` in turn, then succeeds. */
async function tries(leases: GrantedLeases, leased: ReturnType<typeof token>, errors: unknown[]) {
  const retries: boolean[] = [];
  const outcome = await retryLostConnection(leases, leased, async (retry) => {
    retries.push(retry);
    const error = errors[retries.length - 1];
    if (error !== undefined) throw error;
    return 'stored';
  }).catch((error: unknown) => error);
  return { outcome, retries };
}

describe('retryLostConnection', () => {
  it('sends a write whose connection was lost again, telling it that it is a retry', async () => {
    const leases = new GrantedLeases(() => 0);
    const leased = token();
    leases.granted(leased, 0, 30_000);
    const { outcome, retries } = await tries(leases, leased, [terminated(), terminated()]);
    expect(outcome).toBe('stored');
    expect(retries).toEqual([false, true, true]);
  });

  it('gives up after five tries with the last connection error', async () => {
    const leases = new GrantedLeases(() => 0);
    const errors = Array.from({ length: 6 }, terminated);
    const { outcome, retries } = await tries(leases, token(), errors);
    expect(outcome).toBe(errors[4]);
    expect(retries).toHaveLength(LOST_CONNECTION_PAUSES_MS.length + 1);
  });

  it('starts no try once the lease it granted would run out during the pause', async () => {
    let nowMs = 0;
    const leases = new GrantedLeases(() => nowMs);
    const leased = token();
    leases.granted(leased, 0, 1_000);
    nowMs = 950; // 50 ms left: room for the first pause (25 ms), not for the second (75 ms)
    const errors = [terminated(), terminated(), terminated()];
    const { outcome, retries } = await tries(leases, leased, errors);
    expect(retries).toEqual([false, true]);
    expect(outcome).toBe(errors[1]);
  });

  it('counts the lease from the last grant (a heartbeat), not the first', async () => {
    let nowMs = 0;
    const leases = new GrantedLeases(() => nowMs);
    const leased = token();
    leases.granted(leased, 0, 1_000);
    leases.granted(leased, 900, 1_000);
    nowMs = 1_500;
    expect(leases.leftMs(leased)).toBe(400);
    // An earlier grant arriving late does not shorten it.
    leases.granted(leased, 100, 1_000);
    expect(leases.leftMs(leased)).toBe(400);
  });

  it('throws any other failure at once: a lost lease, a refused statement', async () => {
    const leases = new GrantedLeases(() => 0);
    const lost = new LeaseLostError('provider:test', 'evt_1', 1);
    const refused = Object.assign(new Error('value too long'), { code: '22001' });
    for (const error of [lost, refused]) {
      const { outcome, retries } = await tries(leases, token(), [error]);
      expect(outcome).toBe(error);
      expect(retries).toEqual([false]);
    }
  });

  it('sends a write that reached a read-only server (25006) again, which is no connection error', async () => {
    const leases = new GrantedLeases(() => 0);
    const leased = token();
    leases.granted(leased, 0, 30_000);
    const { outcome, retries } = await tries(leases, leased, [readOnly(), readOnly()]);
    expect(outcome).toBe('stored');
    expect(retries).toEqual([false, true, true]);
    // A transaction that met it is still open: nothing parks it as a lost connection.
    expect(isConnectionError(readOnly())).toBe(false);
  });
});

describe('retryLostConnection: a write that does not settle within its lease', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  /** Leases on the fake clock, and a token granted 10 s from now (more than the floor). */
  function leasedForTenSeconds() {
    vi.useFakeTimers({ now: 0 });
    const leases = new GrantedLeases(() => Date.now());
    const leased = token();
    leases.granted(leased, 0, 10_000);
    return { leases, leased };
  }

  it('ends with WritePastLeaseError when the lease ends, not before', async () => {
    const { leases, leased } = leasedForTenSeconds();
    let settled: unknown = 'pending';
    let tried = 0;
    void retryLostConnection(leases, leased, () => {
      tried++;
      return hanging();
    }).catch((error: unknown) => {
      settled = error;
    });
    await vi.advanceTimersByTimeAsync(9_999);
    expect(settled).toBe('pending');
    await vi.advanceTimersByTimeAsync(1);
    expect(settled).toBeInstanceOf(WritePastLeaseError);
    expect(tried).toBe(1); // not sent again: it may still land
  });

  it('bounds the retry of a lost connection by the same lease', async () => {
    const { leases, leased } = leasedForTenSeconds();
    let settled: unknown = 'pending';
    const retries: boolean[] = [];
    void retryLostConnection(leases, leased, (retry) => {
      retries.push(retry);
      return retry ? hanging() : Promise.reject(terminated());
    }).catch((error: unknown) => {
      settled = error;
    });
    await vi.advanceTimersByTimeAsync(9_999);
    expect({ settled, retries }).toEqual({ settled: 'pending', retries: [false, true] });
    await vi.advanceTimersByTimeAsync(1);
    expect(settled).toBeInstanceOf(WritePastLeaseError);
  });

  it('arms one timer for all the pending writes, and none for a token it never saw', async () => {
    const { leases, leased } = leasedForTenSeconds();
    const others = [token(), token()];
    for (const other of others) leases.granted(other, 0, 20_000);
    const baseline = vi.getTimerCount();
    const writes = [leased, ...others].map((held) =>
      retryLostConnection(leases, held, hanging).catch((error: unknown) => error),
    );
    expect(vi.getTimerCount()).toBe(baseline + 1);
    void retryLostConnection(leases, token(), hanging);
    expect(vi.getTimerCount()).toBe(baseline + 1);
    await vi.advanceTimersByTimeAsync(20_000);
    for (const outcome of await Promise.all(writes)) {
      expect(outcome).toBeInstanceOf(WritePastLeaseError);
    }
  });

  it('bounds any work by a deadline of its own (a claim, by the lease it asks for)', async () => {
    vi.useFakeTimers({ now: 0 });
    const leases = new GrantedLeases(() => Date.now());
    const late = new Error('the claim did not settle');
    const claim = leases.within(8_000, hanging(), () => late).catch((error: unknown) => error);
    const settles = leases.within(8_000, Promise.resolve('claimed'), () => late);
    await expect(settles).resolves.toBe('claimed');
    await vi.advanceTimersByTimeAsync(8_000);
    await expect(claim).resolves.toBe(late);
  });

  it('gives a write MIN_WRITE_WAIT_MS even when its lease has already ended', async () => {
    const { leases, leased } = leasedForTenSeconds();
    await vi.advanceTimersByTimeAsync(12_000);
    let settled: unknown = 'pending';
    void retryLostConnection(leases, leased, hanging).catch((error: unknown) => {
      settled = error;
    });
    await vi.advanceTimersByTimeAsync(MIN_WRITE_WAIT_MS - 1);
    expect(settled).toBe('pending');
    await vi.advanceTimersByTimeAsync(1);
    expect(settled).toBeInstanceOf(WritePastLeaseError);
    // A lapsed holder's write that settles hears the store's own answer.
    const lapsed = retryLostConnection(leases, leased, () =>
      Promise.reject(new Error('fenced out')),
    );
    await expect(lapsed).rejects.toThrow('fenced out');
  });
});
