import { isLeaseLostError } from '@idem/core';
import { cachedStore, leaseTokenOf } from '@idem/core/store';
import { claimedToken, storeContract } from '@idem/core/testing/contract';
import { createClient } from 'redis';
import { describe, expect, it } from 'vitest';
import { recordKey } from '../src/recordKey.js';
import { startRedisServer } from '../src/testing/index.js';
import { freshStore, request, until, useRedis } from './redisFixtures.js';
import { redisRisks } from './redisRisks.js';

describe('redisStore on one redis-server', () => {
  const redis = useRedis(
    () => startRedisServer(),
    (server) => createClient({ url: server.url }).connect(),
  );

  // A prefix per test: every test starts with no keys, and none reads another's.
  storeContract('redisStore on one node', async (clock) => ({
    store: freshStore(redis().client, { clock }).store,
  }));

  storeContract('cachedStore over redisStore', async (clock) => ({
    store: cachedStore(freshStore(redis().client, { clock }).store, { maxEntries: 100, clock }),
  }));

  redisRisks('one node', () => ({ client: redis().client, nodes: [redis().client] }));

  describe('a new key and a replay as one plain SET … NX … GET', () => {
    /** How many times Redis ran each command so far, scripts' own included (`INFO commandstats`). */
    const commandCounts = async () => {
      const info = String(await redis().client.sendCommand(['INFO', 'commandstats']));
      const count = (command: string) =>
        Number(new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec(info)?.[1] ?? 0);
      return { set: count('set'), evalsha: count('evalsha') + count('eval'), time: count('time') };
    };
    const serverTime = async () => {
      const [seconds, micros] = (await redis().client.sendCommand(['TIME'])) as string[];
      return Number(seconds) * 1000 + Number(micros) / 1000;
    };

    it("runs no script once the store has read the server's clock, and stamps the claim at or after the server's now", async () => {
      const { store, keyPrefix } = freshStore(redis().client);
      const before = await commandCounts();
      // The store's first call reads the server's clock (TIME) and runs the claim script.
      const first = await store.claim(request({ key: 'first' }));
      const warmed = await commandCounts();
      expect(warmed.time - before.time).toBeGreaterThanOrEqual(1);
      expect(warmed.set - before.set).toBe(1); // the script's own SET
      // Redis now has the completion script too (a first EVALSHA would fail NOSCRIPT, then EVAL).
      await store.complete(leaseTokenOf(first.record), { kind: 'success', value: 1 }, 60_000);
      const loaded = await commandCounts();

      const serverBefore = await serverTime();
      const fresh = await store.claim(request({ key: 'new', leaseMs: 45_000, ttlMs: 90_000 }));
      const serverAfter = await serverTime();
      expect(fresh).toMatchObject({ status: 'claimed', takeover: false });
      const { record } = fresh;
      expect(record).toMatchObject({ version: 1, attempts: 1, status: 'in_progress', steps: {} });
      // An upper bound of the server's clock: never before it; after it by the bound's error.
      expect(record.createdAt).toBeGreaterThanOrEqual(Math.floor(serverBefore));
      expect(record.createdAt).toBeLessThanOrEqual(serverAfter + 1_000);
      expect(record.lockedUntil).toBe(record.createdAt + 45_000);
      expect(record.expiresAt).toBe(record.createdAt + 90_000);
      // Redis keeps the key at least as long as the record says it lives.
      const pttl = Number(
        await redis().client.sendCommand(['PTTL', recordKey(keyPrefix, record.scope, 'new')]),
      );
      expect(pttl).toBeGreaterThan(90_000 - 1_000 - (serverAfter - serverBefore));
      expect(pttl).toBeLessThanOrEqual(90_000 + 1_000);

      await store.complete(leaseTokenOf(record), { kind: 'success', value: 'paid' }, 60_000);
      expect(await store.claim(request({ key: 'new' }))).toMatchObject({
        status: 'replay',
        record: { outcome: { kind: 'success', value: 'paid' }, version: 1 },
      });
      expect(await store.claim(request({ key: 'new', fingerprint: 'other' }))).toMatchObject({
        status: 'mismatch',
      });
      const after = await commandCounts();
      // The new claim, the replay and the mismatch: one SET each; the completion: a script
      // (which writes with a SET of its own).
      expect(after.set - loaded.set).toBe(4);
      expect(after.evalsha - loaded.evalsha).toBe(1);
      expect(await store.get(record.scope, 'new')).toMatchObject({
        createdAt: record.createdAt,
        completedAt: expect.any(Number),
      });
    });

    it('leaves a key in progress, and a lease too short to stamp safely, to the claim script', async () => {
      const { store } = freshStore(redis().client);
      await store.claim(request({ key: 'warm' }));
      const holder = claimedToken(await store.claim(request({ key: 'busy' })));
      const before = await commandCounts();
      const busy = await store.claim(request({ key: 'busy' }));
      expect(busy.status).toBe('in_progress');
      // Lives 200 ms, under the stamp's error margin: the script stamps it exactly.
      const short = await store.claim(request({ key: 'short', leaseMs: 200, ttlMs: 200 }));
      expect(short.status).toBe('claimed');
      const after = await commandCounts();
      // The SET NX that found "busy" in progress, and the claim script's write of "short".
      expect(after.set - before.set).toBe(2);
      expect(after.evalsha - before.evalsha).toBe(2);
      await store.release(holder);
    });

    it('refuses a key that holds a value which is not a record, on either path', async () => {
      const { store, keyPrefix } = freshStore(redis().client);
      await store.claim(request({ key: 'warm' }));
      const scope = request().scope;
      await redis().client.sendCommand(['SET', recordKey(keyPrefix, scope, 'junk'), 'completed x']);
      await redis().client.sendCommand(['SET', recordKey(keyPrefix, scope, 'text'), 'hello']);
      for (const key of ['junk', 'text']) {
        await expect(store.claim(request({ key }))).rejects.toThrow(
          /holds a value that is not an idempotency record/,
        );
      }
    });

    it('fences a holder out of the next incarnation a plain SET stamped', async () => {
      const { store, keyPrefix } = freshStore(redis().client);
      await store.claim(request({ key: 'warm' }));
      const lives = { leaseMs: 1_500, ttlMs: 1_500 };
      const old = claimedToken(await store.claim(request({ key: 'again', ...lives })));
      const redisKey = recordKey(keyPrefix, old.scope, 'again');
      await until('Redis to delete the expired record', async () => {
        return Number(await redis().client.sendCommand(['EXISTS', redisKey])) === 0;
      });
      // The next claim writes version 1 afresh, with a later stamp.
      const next = await store.claim(request({ key: 'again' }));
      expect(next.record.version).toBe(1);
      expect(next.record.createdAt).toBeGreaterThanOrEqual(old.createdAt + 1_500);
      await expect(
        store.complete(old, { kind: 'success', value: 'late' }, 60_000),
      ).rejects.toSatisfy(isLeaseLostError);
    });
  });

  it("keeps a record under the client's own keyPrefix", async () => {
    const client = await createClient({ url: redis().server.url, keyPrefix: 'app:' }).connect();
    try {
      const { store, keyPrefix } = freshStore(client);
      const claim = await store.claim(request({ key: 'prefixed' }));
      expect(claim.status).toBe('claimed');
      const key = recordKey(keyPrefix, request().scope, 'prefixed');
      expect(Number(await redis().client.sendCommand(['EXISTS', `app:${key}`]))).toBe(1);
      expect(Number(await redis().client.sendCommand(['EXISTS', key]))).toBe(0);
      expect((await store.claim(request({ key: 'prefixed' }))).status).toBe('in_progress');
    } finally {
      await client.close();
    }
  });

  it("fails a call Redis does not answer within the client's command timeout", async () => {
    const client = await createClient({
      url: redis().server.url,
      commandOptions: { timeout: 300 },
    }).connect();
    try {
      const { store } = freshStore(client);
      await store.claim(request({ key: 'before' }));
      // Every client's commands wait until the pause ends, well after the timeout.
      await redis().client.sendCommand(['CLIENT', 'PAUSE', '2000', 'ALL']);
      const paused = performance.now();
      await expect(store.claim(request({ key: 'paused' }))).rejects.toThrow(
        /did not answer the claim (script|\(SET NX\)) on .* within 300 ms/,
      );
      expect(performance.now() - paused).toBeLessThan(1_900);
      // Once the pause is over, the claim Redis ran late is there, and the store goes on.
      await redis().client.sendCommand(['PING']);
      expect(await store.get(request().scope, 'paused')).not.toBeNull();
      expect((await store.claim(request({ key: 'after' }))).status).toBe('claimed');
    } finally {
      await client.close();
    }
  });
});
