import { cachedStore } from '@idem/core/store';
import { storeContract } from '@idem/core/testing/contract';
import { createClient } from 'redis';
import { describe, expect, it } from 'vitest';
import { recordKey } from '../src/recordKey.js';
import { startRedisServer } from '../src/testing/index.js';
import { freshStore, request, useRedis } from './redisFixtures.js';
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
        /did not answer the claim script on .* within 300 ms/,
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
