import { LeaseLostError } from '@idem/core';
import { describe, expect, it } from 'vitest';
import {
  GrantedLeases,
  LOST_CONNECTION_PAUSES_MS,
  retryLostConnection,
} from './lostConnectionRetry.js';

/** The error postgres.js gives a statement whose backend was terminated. */
const terminated = () =>
  Object.assign(new Error('terminating connection due to administrator command'), {
    code: '57P01',
  });
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
});
