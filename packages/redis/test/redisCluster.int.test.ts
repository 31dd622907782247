import { storeContract } from '@idem/core/testing';
import { createCluster } from 'redis';
import { afterAll, beforeAll, describe } from 'vitest';
import { redisStore } from '../src/index.js';
import { type RedisCluster, startRedisCluster } from '../src/testing/index.js';

const connect = (rootNodes: { url: string }[]) => createCluster({ rootNodes }).connect();

describe('redisStore on a Redis Cluster of three masters', () => {
  let cluster: RedisCluster;
  let client: Awaited<ReturnType<typeof connect>>;
  beforeAll(async () => {
    cluster = await startRedisCluster({ masters: 3 });
    client = await connect(cluster.rootNodes);
  });
  afterAll(async () => {
    await client?.close();
    await cluster?.stop();
  });

  let test = 0;
  storeContract('redisStore on a cluster', async (clock) => ({
    store: redisStore(client, { clock, keyPrefix: `contract-${test++}:` }),
  }));
});
