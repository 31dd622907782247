import { describe, expect } from 'vitest';
import { isLeaseLostError } from '../../errors/LeaseLostError.js';
import type { ClaimResult } from '../../store/IdempotencyStore.js';
import type { JsonValue } from '../../store/record.js';
import { CONTRACT_LEASE_MS, CONTRACT_TTL_MS, type ContractCase } from './storeContractCase.js';

/**
 * The contract's fencing cases: a holder whose lease was taken over, completed, released or
 * swept writes nothing, and a late completion racing a takeover leaves one winner.
 */
export function fencingCases(t: ContractCase): void {
  describe('fencing', () => {
    fencedWriteCases(t);
    leaseLifeCases(t);
  });
}

/** Writes of a holder that no longer holds the key: refused, and nothing written. */
function fencedWriteCases(t: ContractCase): void {
  const { it, request, tokenOf, success, expectLeaseLost } = t;
  it('rejects every write of a holder that was taken over, writing nothing', async ({
    store,
    clock,
  }) => {
    const zombie = tokenOf(await store.claim(request()));
    await store.saveStep(zombie, 'reserve', true);
    clock.advance(CONTRACT_LEASE_MS + 1);
    const current = tokenOf(await store.claim(request()));
    const before = await store.get(current.scope, current.key);

    await expectLeaseLost(store.complete(zombie, success('zombie'), CONTRACT_TTL_MS));
    await expectLeaseLost(store.release(zombie));
    await expectLeaseLost(store.heartbeat(zombie, CONTRACT_LEASE_MS * 10));
    await expectLeaseLost(store.saveStep(zombie, 'charge', 'zombie-charge'));
    expect(await store.get(current.scope, current.key)).toEqual(before);

    await store.complete(current, success('current'), CONTRACT_TTL_MS);
    const replay = await store.claim(request());
    expect(replay.record.outcome).toEqual(success('current'));
  });

  it('rejects writes after completion, and writes to a key nobody holds', async ({
    store,
    clock,
  }) => {
    const token = tokenOf(await store.claim(request()));
    await store.complete(token, success(1), CONTRACT_TTL_MS);
    await expectLeaseLost(store.complete(token, success(2), CONTRACT_TTL_MS));
    await expectLeaseLost(store.release(token));
    await expectLeaseLost(store.heartbeat(token, CONTRACT_LEASE_MS));
    await expectLeaseLost(store.saveStep(token, 'late', 1));
    await expectLeaseLost(
      store.release({ scope: 's', key: 'never-claimed', version: 1, createdAt: clock.now() }),
    );
    expect((await store.get(token.scope, token.key))?.outcome).toEqual(success(1));
  });

  it('fences a holder from before a sweep out of the key claimed afresh after it', async ({
    store,
    clock,
  }) => {
    const zombie = tokenOf(await store.claim(request()));
    clock.advance(CONTRACT_TTL_MS);
    expect(await store.sweep({ limit: 10 })).toBe(1);
    clock.advance(1);
    const fresh = tokenOf(await store.claim(request()));
    expect(fresh.version).toBe(zombie.version);
    await expectLeaseLost(store.saveStep(zombie, 'charge', 'zombie'));
    await expectLeaseLost(store.heartbeat(zombie, CONTRACT_LEASE_MS));
    await expectLeaseLost(store.complete(zombie, success('zombie'), CONTRACT_TTL_MS));
    await expectLeaseLost(store.release(zombie));
    const record = await store.get(fresh.scope, fresh.key);
    expect(record).toMatchObject({ status: 'in_progress', steps: {}, outcome: null });
    expect(record?.lockedUntil).toBe(clock.now() + CONTRACT_LEASE_MS);
  });

  it('lets the holder finish after its lease ran out if nobody took over', async ({
    store,
    clock,
  }) => {
    const token = tokenOf(await store.claim(request()));
    clock.advance(CONTRACT_LEASE_MS * 3);
    await store.complete(token, success('late but sole'), CONTRACT_TTL_MS);
    expect((await store.claim(request())).status).toBe('replay');
  });
}

/** What release and heartbeat do to the lease, steps kept, and a completion racing a takeover. */
function leaseLifeCases(t: ContractCase): void {
  const { it, request, tokenOf, success } = t;
  it('ends the lease on release, so the next claim takes over at once with the steps', async ({
    store,
  }) => {
    const token = tokenOf(await store.claim(request()));
    await store.saveStep(token, 'charge', { id: 'ch_9' });
    await store.release(token);
    const result = await store.claim(request());
    expect(result).toMatchObject({ status: 'claimed', takeover: true });
    expect(result.record).toMatchObject({ version: 2, steps: { charge: { id: 'ch_9' } } });
  });

  it('extends the lease on heartbeat', async ({ store, clock }) => {
    const token = tokenOf(await store.claim(request()));
    clock.advance(800);
    await store.heartbeat(token, CONTRACT_LEASE_MS);
    clock.advance(700);
    const result = await store.claim(request());
    expect(result.status).toBe('in_progress');
    expect(result.status === 'in_progress' && result.retryAfterMs).toBe(300);
  });

  it('merges recovery points and keeps every JSON shape', async ({ store }) => {
    const token = tokenOf(await store.claim(request()));
    const steps = {
      a: 1,
      b: 'two',
      c: [1, { d: null }],
      e: { nested: { deep: true } },
      f: false,
      g: null,
    } as const;
    for (const [stepName, value] of Object.entries(steps)) {
      await store.saveStep(token, stepName, value as JsonValue);
    }
    await store.saveStep(token, 'a', 'overwritten');
    expect((await store.get(token.scope, token.key))?.steps).toEqual({
      ...steps,
      a: 'overwritten',
    });
  });

  it('lets exactly one of a late completion and a takeover win', async ({ store, clock }) => {
    const tokens = await Promise.all(
      Array.from({ length: 20 }, async (_, index) =>
        tokenOf(await store.claim(request({ key: `race-${index}` }))),
      ),
    );
    clock.advance(CONTRACT_LEASE_MS + 1);
    const outcomes = await Promise.all(
      tokens.map(async (token) => {
        const [completed, claimed] = await Promise.allSettled([
          store.complete(token, success('zombie'), CONTRACT_TTL_MS),
          store.claim(request({ key: token.key })),
        ]);
        return { completed, claimed };
      }),
    );
    for (const { completed, claimed } of outcomes) {
      expect(claimed.status).toBe('fulfilled');
      const claim = (claimed as PromiseFulfilledResult<ClaimResult>).value;
      if (completed.status === 'fulfilled') {
        expect(claim.status).toBe('replay');
      } else {
        expect(isLeaseLostError(completed.reason)).toBe(true);
        expect(claim).toMatchObject({ status: 'claimed', takeover: true });
      }
    }
  });
}
