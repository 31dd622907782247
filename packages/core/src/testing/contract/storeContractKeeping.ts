import { describe, expect } from 'vitest';
import { CONTRACT_LEASE_MS, CONTRACT_TTL_MS, type ContractCase } from './storeContractCase.js';

/** The contract's cases of a record's end: reads past its TTL, and sweeping. */
export function sweepCases(t: ContractCase): void {
  const { it, request, tokenOf, success } = t;
  describe('TTL and sweeping', () => {
    it('returns null from get for unknown and expired keys', async ({ store, clock }) => {
      expect(await store.get('nobody', 'nothing')).toBeNull();
      const token = tokenOf(await store.claim(request()));
      await store.complete(token, success(1), 1_000);
      expect((await store.get(token.scope, token.key))?.status).toBe('completed');
      clock.advance(1_000);
      expect(await store.get(token.scope, token.key)).toBeNull();
    });

    it('sweeps only expired records, at most `limit` per call', async ({ store, clock }) => {
      for (let index = 0; index < 5; index++) {
        const token = tokenOf(await store.claim(request({ key: `old-${index}` })));
        await store.complete(token, success(index), 1_000);
      }
      const young = tokenOf(await store.claim(request({ key: 'young' })));
      await store.complete(young, success('young'), 10_000);
      const running = tokenOf(await store.claim(request({ key: 'running', ttlMs: 500 })));
      clock.advance(900);
      await store.heartbeat(running, CONTRACT_LEASE_MS);
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
}

/** One winner among concurrent claims, and scopes kept apart. */
export function isolationCases(t: ContractCase): void {
  const { it, request, tokenOf, success } = t;
  describe('concurrency and isolation', () => {
    it('gives 200 concurrent claims of one key exactly one winner', async ({ store }) => {
      const results = await Promise.all(
        Array.from({ length: 200 }, () => store.claim(request({ key: 'hot' }))),
      );
      const statuses = results.map((result) => result.status);
      expect(statuses.filter((status) => status === 'claimed')).toHaveLength(1);
      expect(statuses.filter((status) => status === 'in_progress')).toHaveLength(199);
    });

    it('keeps scopes apart: one principal never sees another one’s key', async ({ store }) => {
      const a = tokenOf(await store.claim(request({ scope: 'user:a/pay' })));
      const b = await store.claim(request({ scope: 'user:b/pay', fingerprint: 'fp-b' }));
      expect(b).toMatchObject({ status: 'claimed', takeover: false });
      await store.complete(a, success('for a'), CONTRACT_TTL_MS);
      expect((await store.get('user:b/pay', 'key-1'))?.outcome).toBeNull();
      expect((await store.claim(request({ scope: 'user:a/pay' }))).record.outcome).toEqual(
        success('for a'),
      );
    });
  });
}

/** Large and unicode payloads, stored and read back exactly. */
export function payloadCases(t: ContractCase): void {
  const { it, request, tokenOf, success } = t;
  describe('payload fidelity', () => {
    it('round-trips a 1 MB outcome', async ({ store }) => {
      const big = {
        blob: 'x'.repeat(1024 * 1024),
        rows: Array.from({ length: 1000 }, (_, index) => ({ index, label: `row ${index}` })),
      };
      const token = tokenOf(await store.claim(request()));
      await store.complete(token, success(big), CONTRACT_TTL_MS);
      expect((await store.claim(request())).record.outcome).toEqual(success(big));
    });

    it('round-trips unicode in scopes, fingerprints, steps and outcomes', async ({ store }) => {
      const scope = 'tenant:Zürich/用户:李/orders.create';
      const text = 'naïve café — 日本語 — עברית — 👩‍👩‍👧‍👦 — e\u0301 — 𝄞 — "quotes" \\ \n\t';
      const token = tokenOf(await store.claim(request({ scope })));
      await store.saveStep(token, 'ünïcode-step-名', { text });
      await store.complete(token, success({ [text]: text, list: [text] }), CONTRACT_TTL_MS);
      const replay = await store.claim(request({ scope }));
      expect(replay.status).toBe('replay');
      expect(replay.record.scope).toBe(scope);
      expect(replay.record.steps).toEqual({ 'ünïcode-step-名': { text } });
      expect(replay.record.outcome).toEqual(success({ [text]: text, list: [text] }));
    });
  });
}
