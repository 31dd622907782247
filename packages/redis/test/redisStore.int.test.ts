import { cachedStore } from '@idem/core/store';
import { storeContract } from '@idem/core/testing/contract';
import { createClient } from 'redis';
import { afterAll, beforeAll, describe } from 'vitest';
import { redisStore } from '../src/index.js';
import { type RedisServer, startRedisServer } from '../src/testing/index.js';
import { redisRisks } from './redisRisks.js';

const connect = (url: string) => createClient({ url }).connect();

describe('redisStore on one redis-server', () => {
  let server: RedisServer;
  let client: Awaited<ReturnType<typeof connect>>;
  beforeAll(async () => {
    server = await startRedisServer();
    client = await connect(server.url);
  });
  afterAll(async () => {
    await client?.close();
    await server?.stop();
  });

  // A prefix per test: every test starts with no keys, and none reads another's.
  let test = 0;
  storeContract('redisStore on one node', async (clock) => ({
    store: redisStore(client, { clock, keyPrefix: `contract-${test++}:` }),
  }));

  storeContract('cachedStore over redisStore', async (clock) => ({
    store: cachedStore(redisStore(client, { clock, keyPrefix: `contract-${test++}:` }), {
      maxEntries: 100,
      clock,
    }),
  }));

  redisRisks('one node', () => ({ client, nodes: [client] }));
});
