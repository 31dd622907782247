import { isLeaseLostError } from '@idem/core';
import { leaseTokenOf } from '@idem/core/store';
import { storeContract } from '@idem/core/testing/contract';
import { createCluster } from 'redis';
import { beforeAll, describe, expect, it } from 'vitest';
import { redisStore } from '../src/index.js';
import { recordKey } from '../src/recordKey.js';
import { startRedisCluster } from '../src/testing/index.js';
import { at, freshStore, request as redisRequest, until, useRedis } from './redisFixtures.js';
import { type NodeCommands, redisRisks } from './redisRisks.js';

describe('redisStore on a Redis Cluster of three masters', () => {
  const redis = useRedis(
    () => startRedisCluster({ masters: 3, readyTimeoutMs: 60_000 }),
    (cluster) => createCluster({ rootNodes: cluster.rootNodes }).connect(),
  );
  let nodes: NodeCommands[];
  beforeAll(async () => {
    const { client } = redis();
    nodes = await Promise.all(client.masters.map((master) => client.nodeClient(master)));
  });

  storeContract('redisStore on a cluster', async (clock) => ({
    store: freshStore(redis().client, { clock }).store,
  }));

  redisRisks('cluster', () => ({ client: redis().client, nodes }));

  const request = (key: string) =>
    redisRequest({ scope: 'tenant:acme/pay', key, fingerprint: 'fp' });

  it('spreads records over every master, each record whole on one node', async () => {
    const { client } = redis();
    const store = redisStore(client, { keyPrefix: 'spread:' });
    const keys = Array.from({ length: 60 }, (_, index) => `order-${index}`);
    for (const key of keys) {
      const claim = await store.claim(request(key));
      await store.saveStep(leaseTokenOf(claim.record), 'charge', key);
    }
    const counts = await Promise.all(
      nodes.map(async (node) => {
        let count = 0;
        for (const key of keys) {
          const exists = await node
            .sendCommand(['EXISTS', recordKey('spread:', 'tenant:acme/pay', key)])
            .then(Number, () => 0); // MOVED: another node owns the slot
          count += exists;
        }
        return count;
      }),
    );
    expect(counts.reduce((sum, count) => sum + count, 0)).toBe(keys.length);
    expect(counts.every((count) => count > 0)).toBe(true);
  });

  it('runs on two cluster clients as on one: each record on its master, claims fenced', async () => {
    const { server, client } = redis();
    const second = await createCluster({
      rootNodes: server.rootNodes,
      defaults: { name: 'idem-second' },
    }).connect();
    try {
      const store = redisStore([client, second], { keyPrefix: 'two:' });
      const keys = Array.from({ length: 32 }, (_, index) => `order-${index}`);
      const claims = await Promise.all(keys.map((key) => store.claim(request(key))));
      expect(claims.map(({ status }) => status)).toEqual(keys.map(() => 'claimed'));
      await Promise.all(
        claims.map((claim) =>
          store.complete(leaseTokenOf(claim.record), { kind: 'success', value: 1 }, 60_000),
        ),
      );
      // A completed key: a replay through either client; its old lease writes nothing.
      const replays = await Promise.all(keys.map((key) => store.claim(request(key))));
      expect(replays.map(({ status }) => status)).toEqual(keys.map(() => 'replay'));
      const stale = leaseTokenOf(at(claims, 0).record);
      await expect(store.heartbeat(stale, 30_000)).rejects.toSatisfy(isLeaseLostError);
      // The second client carried some of the calls: its connections ran the scripts.
      const lists = await Promise.all(nodes.map((node) => node.sendCommand(['CLIENT', 'LIST'])));
      const secondRan = String(lists)
        .split('\n')
        .filter((line) => line.includes(' name=idem-second '))
        .some((line) => /\bcmd=eval/.test(line));
      expect(secondRan).toBe(true);
    } finally {
      await second.close();
    }
  });

  it('follows a record whose slot moved to another master (MOVED), fencing intact', async () => {
    const { client } = redis();
    const store = redisStore(client, { keyPrefix: 'moved:' });
    const zombieClaim = await store.claim({ ...request('k-moved'), leaseMs: 200 });
    const zombie = leaseTokenOf(zombieClaim.record);
    const key = recordKey('moved:', 'tenant:acme/pay', 'k-moved');
    const slot = Number(await at(nodes, 0).sendCommand(['CLUSTER', 'KEYSLOT', key]));
    const ids = (await Promise.all(
      nodes.map((node) => node.sendCommand(['CLUSTER', 'MYID'])),
    )) as string[];
    const holds = await Promise.all(
      nodes.map(async (node) =>
        Number(await node.sendCommand(['CLUSTER', 'COUNTKEYSINSLOT', String(slot)])),
      ),
    );
    const from = holds.indexOf(1);
    const to = (from + 1) % nodes.length;
    expect(from).toBeGreaterThanOrEqual(0);
    const [source, target] = [at(nodes, from), at(nodes, to)];
    // The resharding steps of the Redis Cluster specification, for one slot.
    await target.sendCommand(['CLUSTER', 'SETSLOT', String(slot), 'IMPORTING', at(ids, from)]);
    await source.sendCommand(['CLUSTER', 'SETSLOT', String(slot), 'MIGRATING', at(ids, to)]);
    await source.sendCommand([
      'MIGRATE',
      '127.0.0.1',
      String(at(client.masters, to).port),
      '',
      '0',
      '10000',
      'KEYS',
      key,
    ]);
    for (const node of nodes) {
      await node.sendCommand(['CLUSTER', 'SETSLOT', String(slot), 'NODE', at(ids, to)]);
    }
    expect(Number(await target.sendCommand(['EXISTS', key]))).toBe(1);
    const movedBefore = await movedAnswers(source);

    // The client still maps the slot to the old node: MOVED sends it to the new one, which
    // has never run the scripts (NOSCRIPT, then EVAL).
    const takeover = await until(
      'a claim to follow the moved slot',
      () => store.claim(request('k-moved')),
      (claim) => claim.status === 'claimed',
    );
    expect(takeover).toMatchObject({ status: 'claimed', takeover: true });
    expect(await movedAnswers(source)).toBeGreaterThan(movedBefore);
    await expect(
      store.complete(zombie, { kind: 'success', value: 'zombie' }, 60_000),
    ).rejects.toSatisfy(isLeaseLostError);
    await store.complete(leaseTokenOf(takeover.record), { kind: 'success', value: 'new' }, 60_000);
    const replay = await store.claim(request('k-moved'));
    expect(replay.status).toBe('replay');
    expect(replay.record.outcome).toEqual({ kind: 'success', value: 'new' });
  });
});

/** How many MOVED redirections `node` has answered (`INFO errorstats`). */
async function movedAnswers(node: NodeCommands): Promise<number> {
  const info = String(await node.sendCommand(['INFO', 'errorstats']));
  return Number(/errorstat_MOVED:count=(\d+)/.exec(info)?.[1] ?? 0);
}
