import { describe, expect } from 'vitest';
import type { StoredOutcome } from '../../store/record.js';
import { CONTRACT_LEASE_MS, CONTRACT_TTL_MS, type ContractCase } from './storeContractCase.js';

/**
 * The contract's claim table: a first claim, a replay of what was stored, a mismatch, a live
 * lease, a takeover of an expired one, and a fresh start after the TTL.
 */
export function claimTableCases(t: ContractCase): void {
  describe('claim table', () => {
    firstClaimCases(t);
    laterClaimCases(t);
  });
}

/** The first claim of a key, and the replay of the outcome it stored. */
function firstClaimCases(t: ContractCase): void {
  const { it, request, tokenOf, success } = t;
  it('claims a new key with version 1 and a lease', async ({ store, clock }) => {
    const now = clock.now();
    const result = await store.claim(request());
    expect(result).toMatchObject({ status: 'claimed', takeover: false });
    expect(result.record).toMatchObject({
      scope: 'user:1/orders.create',
      key: 'key-1',
      fingerprint: 'fp-a',
      status: 'in_progress',
      version: 1,
      attempts: 1,
      lockedUntil: now + CONTRACT_LEASE_MS,
      outcome: null,
      steps: {},
      createdAt: now,
      completedAt: null,
      expiresAt: now + CONTRACT_TTL_MS,
    });
  });

  it('replays a completed success without claiming again', async ({ store, clock }) => {
    const token = tokenOf(await store.claim(request()));
    clock.advance(10);
    await store.complete(token, success({ orderId: 7, total: '12.50' }), CONTRACT_TTL_MS);
    clock.advance(10);
    const result = await store.claim(request());
    expect(result.status).toBe('replay');
    expect(result.record.outcome).toEqual({
      kind: 'success',
      value: { orderId: 7, total: '12.50' },
    });
    expect(result.record).toMatchObject({
      status: 'completed',
      version: 1,
      lockedUntil: null,
      completedAt: clock.now() - 10,
      expiresAt: clock.now() - 10 + CONTRACT_TTL_MS,
    });
  });

  it('replays a stored error exactly', async ({ store }) => {
    const token = tokenOf(await store.claim(request()));
    const outcome: StoredOutcome = {
      kind: 'error',
      error: {
        name: 'TRPCError',
        message: 'Card declined',
        code: 'PAYMENT_REQUIRED',
        data: { declineCode: 'insufficient_funds', retryable: false },
      },
    };
    await store.complete(token, outcome, CONTRACT_TTL_MS);
    const result = await store.claim(request());
    expect(result.status).toBe('replay');
    expect(result.record.outcome).toEqual(outcome);
  });
}

/** A claim of a key somebody claimed before: mismatch, in progress, takeover or afresh. */
function laterClaimCases(t: ContractCase): void {
  const { it, request, tokenOf, success } = t;
  it('answers mismatch for another fingerprint, in progress or completed', async ({ store }) => {
    const token = tokenOf(await store.claim(request()));
    expect((await store.claim(request({ fingerprint: 'fp-b' }))).status).toBe('mismatch');
    await store.complete(token, success(1), CONTRACT_TTL_MS);
    const result = await store.claim(request({ fingerprint: 'fp-b' }));
    expect(result.status).toBe('mismatch');
    expect(result.record.fingerprint).toBe('fp-a');
  });

  it('answers mismatch for another fingerprint even when the lease expired', async ({
    store,
    clock,
  }) => {
    await store.claim(request());
    clock.advance(CONTRACT_LEASE_MS * 2);
    expect((await store.claim(request({ fingerprint: 'fp-b' }))).status).toBe('mismatch');
  });

  it('answers in_progress with the time left on a live lease', async ({ store, clock }) => {
    await store.claim(request());
    clock.advance(400);
    const result = await store.claim(request());
    expect(result.status).toBe('in_progress');
    expect(result.status === 'in_progress' && result.retryAfterMs).toBe(CONTRACT_LEASE_MS - 400);
    expect(result.record.version).toBe(1);
  });

  it('takes over an expired lease with version + 1, carrying the steps', async ({
    store,
    clock,
  }) => {
    const token = tokenOf(await store.claim(request()));
    await store.saveStep(token, 'charge', { chargeId: 'ch_1' });
    clock.advance(CONTRACT_LEASE_MS);
    const result = await store.claim(request());
    expect(result).toMatchObject({ status: 'claimed', takeover: true });
    expect(result.record).toMatchObject({
      version: 2,
      attempts: 2,
      status: 'in_progress',
      lockedUntil: clock.now() + CONTRACT_LEASE_MS,
      steps: { charge: { chargeId: 'ch_1' } },
    });
  });

  it('starts afresh after the TTL, with a version that never repeats', async ({ store, clock }) => {
    const token = tokenOf(await store.claim(request()));
    await store.saveStep(token, 'charge', 'ch_1');
    await store.complete(token, success('first'), CONTRACT_TTL_MS);
    clock.advance(CONTRACT_TTL_MS);
    const result = await store.claim(request({ fingerprint: 'fp-b' }));
    expect(result).toMatchObject({ status: 'claimed', takeover: false });
    expect(result.record).toMatchObject({
      fingerprint: 'fp-b',
      attempts: 1,
      steps: {},
      outcome: null,
      createdAt: clock.now(),
      expiresAt: clock.now() + CONTRACT_TTL_MS,
    });
    expect(result.record.version).toBeGreaterThan(token.version);
  });

  it('keeps an in-progress record past its TTL while its lease is alive', async ({
    store,
    clock,
  }) => {
    const token = tokenOf(await store.claim(request({ ttlMs: 500, leaseMs: CONTRACT_LEASE_MS })));
    clock.advance(600);
    expect((await store.claim(request())).status).toBe('in_progress');
    expect(await store.get(token.scope, token.key)).not.toBeNull();
  });
}
