import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { IdempotencyStore } from '../../store/IdempotencyStore.js';
import type { StoredOutcome } from '../../store/record.js';
import { type ManualClock, manualClock } from '../manualClock.js';
import { contractHelpers, LEASE_MS, TTL_MS } from './storeContractCase.js';
import { fencingCases } from './storeContractFencing.js';

export interface StoreContractSubject {
  store: IdempotencyStore;
  /** Runs after each test: close connections, drop data. */
  cleanup?: () => Promise<void>;
}

/**
 * Builds a store for one test. It must read time from `clock` and start with no keys.
 */
export type StoreContractSetup = (clock: ManualClock) => Promise<StoreContractSubject>;

/**
 * The conformance suite every `IdempotencyStore` must pass: each row of the claim table,
 * fencing, takeover, TTL, sweeping, concurrency, isolation and payload fidelity.
 * Call it inside a vitest test file: `storeContract('my store', async (clock) => …)`.
 */
export function storeContract(name: string, setup: StoreContractSetup): void {
  describe(`IdempotencyStore contract: ${name}`, () => {
    let clock: ManualClock;
    let store: IdempotencyStore;
    let subject: StoreContractSubject;

    beforeEach(async () => {
      clock = manualClock(Date.UTC(2026, 0, 1, 12));
      subject = await setup(clock);
      store = subject.store;
    });
    afterEach(async () => {
      await subject.cleanup?.();
    });

    const { request, tokenOf, success } = contractHelpers;

    describe('claim table', () => {
      it('claims a new key with version 1 and a lease', async () => {
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
          lockedUntil: now + LEASE_MS,
          outcome: null,
          steps: {},
          createdAt: now,
          completedAt: null,
          expiresAt: now + TTL_MS,
        });
      });

      it('replays a completed success without claiming again', async () => {
        const token = tokenOf(await store.claim(request()));
        clock.advance(10);
        await store.complete(token, success({ orderId: 7, total: '12.50' }), TTL_MS);
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
          expiresAt: clock.now() - 10 + TTL_MS,
        });
      });

      it('replays a stored error exactly', async () => {
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
        await store.complete(token, outcome, TTL_MS);
        const result = await store.claim(request());
        expect(result.status).toBe('replay');
        expect(result.record.outcome).toEqual(outcome);
      });

      it('answers mismatch for another fingerprint, in progress or completed', async () => {
        const token = tokenOf(await store.claim(request()));
        expect((await store.claim(request({ fingerprint: 'fp-b' }))).status).toBe('mismatch');
        await store.complete(token, success(1), TTL_MS);
        const result = await store.claim(request({ fingerprint: 'fp-b' }));
        expect(result.status).toBe('mismatch');
        expect(result.record.fingerprint).toBe('fp-a');
      });

      it('answers mismatch for another fingerprint even when the lease expired', async () => {
        await store.claim(request());
        clock.advance(LEASE_MS * 2);
        expect((await store.claim(request({ fingerprint: 'fp-b' }))).status).toBe('mismatch');
      });

      it('answers in_progress with the time left on a live lease', async () => {
        await store.claim(request());
        clock.advance(400);
        const result = await store.claim(request());
        expect(result.status).toBe('in_progress');
        expect(result.status === 'in_progress' && result.retryAfterMs).toBe(LEASE_MS - 400);
        expect(result.record.version).toBe(1);
      });

      it('takes over an expired lease with version + 1, carrying the steps', async () => {
        const token = tokenOf(await store.claim(request()));
        await store.saveStep(token, 'charge', { chargeId: 'ch_1' });
        clock.advance(LEASE_MS);
        const result = await store.claim(request());
        expect(result).toMatchObject({ status: 'claimed', takeover: true });
        expect(result.record).toMatchObject({
          version: 2,
          attempts: 2,
          status: 'in_progress',
          lockedUntil: clock.now() + LEASE_MS,
          steps: { charge: { chargeId: 'ch_1' } },
        });
      });

      it('starts afresh after the TTL, with a version that never repeats', async () => {
        const token = tokenOf(await store.claim(request()));
        await store.saveStep(token, 'charge', 'ch_1');
        await store.complete(token, success('first'), TTL_MS);
        clock.advance(TTL_MS);
        const result = await store.claim(request({ fingerprint: 'fp-b' }));
        expect(result).toMatchObject({ status: 'claimed', takeover: false });
        expect(result.record).toMatchObject({
          fingerprint: 'fp-b',
          attempts: 1,
          steps: {},
          outcome: null,
          createdAt: clock.now(),
          expiresAt: clock.now() + TTL_MS,
        });
        expect(result.record.version).toBeGreaterThan(token.version);
      });

      it('keeps an in-progress record past its TTL while its lease is alive', async () => {
        const token = tokenOf(await store.claim(request({ ttlMs: 500, leaseMs: LEASE_MS })));
        clock.advance(600);
        expect((await store.claim(request())).status).toBe('in_progress');
        expect(await store.get(token.scope, token.key)).not.toBeNull();
      });
    });

    fencingCases({ current: () => ({ store, clock }), ...contractHelpers });

    describe('TTL and sweeping', () => {
      it('returns null from get for unknown and expired keys', async () => {
        expect(await store.get('nobody', 'nothing')).toBeNull();
        const token = tokenOf(await store.claim(request()));
        await store.complete(token, success(1), 1_000);
        expect((await store.get(token.scope, token.key))?.status).toBe('completed');
        clock.advance(1_000);
        expect(await store.get(token.scope, token.key)).toBeNull();
      });

      it('sweeps only expired records, at most `limit` per call', async () => {
        for (let index = 0; index < 5; index++) {
          const token = tokenOf(await store.claim(request({ key: `old-${index}` })));
          await store.complete(token, success(index), 1_000);
        }
        const young = tokenOf(await store.claim(request({ key: 'young' })));
        await store.complete(young, success('young'), 10_000);
        const running = tokenOf(await store.claim(request({ key: 'running', ttlMs: 500 })));
        clock.advance(900);
        await store.heartbeat(running, LEASE_MS);
        await store.claim(request({ key: 'abandoned', ttlMs: 500, leaseMs: 500 }));
        clock.advance(600);

        expect(await store.sweep({ limit: 2 })).toBe(2);
        expect(await store.sweep({ limit: 100 })).toBe(4);
        expect(await store.sweep({ limit: 100 })).toBe(0);
        expect(await store.get(young.scope, 'young')).not.toBeNull();
        expect(await store.get(running.scope, 'running')).not.toBeNull();
        for (let index = 0; index < 5; index++) {
          expect((await store.claim(request({ key: `old-${index}` }))).status).toBe('claimed');
        }
      });
    });

    describe('concurrency and isolation', () => {
      it('gives 200 concurrent claims of one key exactly one winner', async () => {
        const results = await Promise.all(
          Array.from({ length: 200 }, () => store.claim(request({ key: 'hot' }))),
        );
        const statuses = results.map((result) => result.status);
        expect(statuses.filter((status) => status === 'claimed')).toHaveLength(1);
        expect(statuses.filter((status) => status === 'in_progress')).toHaveLength(199);
      });

      it('keeps scopes apart: one principal never sees another one’s key', async () => {
        const a = tokenOf(await store.claim(request({ scope: 'user:a/pay' })));
        const b = await store.claim(request({ scope: 'user:b/pay', fingerprint: 'fp-b' }));
        expect(b).toMatchObject({ status: 'claimed', takeover: false });
        await store.complete(a, success('for a'), TTL_MS);
        expect((await store.get('user:b/pay', 'key-1'))?.outcome).toBeNull();
        expect((await store.claim(request({ scope: 'user:a/pay' }))).record.outcome).toEqual(
          success('for a'),
        );
      });
    });

    describe('payload fidelity', () => {
      it('round-trips a 1 MB outcome', async () => {
        const big = {
          blob: 'x'.repeat(1024 * 1024),
          rows: Array.from({ length: 1000 }, (_, index) => ({ index, label: `row ${index}` })),
        };
        const token = tokenOf(await store.claim(request()));
        await store.complete(token, success(big), TTL_MS);
        expect((await store.claim(request())).record.outcome).toEqual(success(big));
      });

      it('round-trips unicode in scopes, fingerprints, steps and outcomes', async () => {
        const scope = 'tenant:Zürich/用户:李/orders.create';
        const text = 'naïve café — 日本語 — עברית — 👩‍👩‍👧‍👦 — e\u0301 — 𝄞 — "quotes" \\ \n\t';
        const token = tokenOf(await store.claim(request({ scope })));
        await store.saveStep(token, 'ünïcode-step-名', { text });
        await store.complete(token, success({ [text]: text, list: [text] }), TTL_MS);
        const replay = await store.claim(request({ scope }));
        expect(replay.status).toBe('replay');
        expect(replay.record.scope).toBe(scope);
        expect(replay.record.steps).toEqual({ 'ünïcode-step-名': { text } });
        expect(replay.record.outcome).toEqual(success({ [text]: text, list: [text] }));
      });
    });
  });
}
