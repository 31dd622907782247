import { cachedStore } from '@idem/core/store';
import { storeContract } from '@idem/core/testing/contract';
import { createClient } from 'redis';
import { describe } from 'vitest';
import { startRedisServer } from '../src/testing/index.js';
import { freshStore, useRedis } from './redisFixtures.js';
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
});
