import { isConfigurationError, isLeaseLostError } from '@idem/core';
import { leaseTokenOf } from '@idem/core/store';
import { claimedToken, serverClockContract } from '@idem/core/testing/contract';
import { describe, expect, it } from 'vitest';
import { type RedisConnection, redisStore } from '../src/index.js';
import { recordKey } from '../src/recordKey.js';
import { scripts } from '../src/scripts.js';
import { at, freshStore, request, serverTimeOf, until } from './redisFixtures.js';

/** A client to one node, for the commands a test sends past the store. */
export interface NodeCommands {
  sendCommand(args: string[]): Promise<unknown>;
}

export interface RisksSubject {
  /** The client the store runs on (one node, or the cluster), or its connections. */
  client: RedisConnection | readonly RedisConnection[];
  /** One client per master (one node: the same server). */
  nodes: NodeCommands[];
}

/**
 * What the contract cannot show because it moves time by hand: the Redis server's clock as
 * the judge (the contract's `serverClockContract`, on TIME), Redis's own expiry, the NOSCRIPT
 * fallback, and the key encoding.
 */
export function redisRisks(name: string, subject: () => RisksSubject): void {
  describe(`redisStore beyond the contract: ${name}`, () => {
    /** A store of its own per test: a key prefix nobody else uses. */
    const fresh = () => freshStore(subject().client);
    const serverTime = () => serverTimeOf(at(subject().nodes, 0));
    const pttl = async (prefix: string, scope: string, key: string) =>
      Number(
        await nodeOf(recordKey(prefix, scope, key)).then((node) =>
          node.sendCommand(['PTTL', recordKey(prefix, scope, key)]),
        ),
      );
    /** 1 when `node` holds `key`; a cluster node that does not own its slot answers MOVED. */
    const existsOn = (node: NodeCommands, key: string) =>
      node.sendCommand(['EXISTS', key]).then(Number, (error: Error) => {
        if (error.message.startsWith('MOVED')) return 0;
        throw error;
      });
    /** The node that holds `key`, for commands sent past the store's client. */
    const nodeOf = async (key: string): Promise<NodeCommands> => {
      for (const node of subject().nodes) if ((await existsOn(node, key)) === 1) return node;
      throw new Error(`no node holds ${key}`);
    };
    const flushScripts = () =>
      Promise.all(subject().nodes.map((node) => node.sendCommand(['SCRIPT', 'FLUSH'])));

    serverClockContract(`redisStore (TIME): ${name}`, async () => ({
      store: fresh().store,
      serverNow: serverTime,
    }));

    it('lets Redis expire each record at its end: the lease while in progress, else the TTL', async () => {
      const { store, keyPrefix: prefix } = fresh();
      // The lease outlives the TTL: Redis keeps the key while its holder is alive.
      const token = claimedToken(await store.claim(request({ ttlMs: 100, leaseMs: 60_000 })));
      expect(await pttl(prefix, token.scope, token.key)).toBeGreaterThan(50_000);
      await store.heartbeat(token, 120_000);
      expect(await pttl(prefix, token.scope, token.key)).toBeGreaterThan(100_000);
      await store.complete(token, { kind: 'success', value: 'done' }, 2_000);
      // At most the TTL left; 0 (its last millisecond) or -2 (gone) only after a 2 s stall.
      const left = await pttl(prefix, token.scope, token.key).catch(() => -2);
      expect(left === -2 || (left >= 0 && left <= 2_000), `PTTL ${left}`).toBe(true);
      await until('the completed record to expire', async () => {
        return (await store.get(token.scope, token.key)) === null;
      });
      await until('Redis to delete the key', async () => {
        const key = recordKey(prefix, token.scope, token.key);
        const counts = await Promise.all(subject().nodes.map((node) => existsOn(node, key)));
        return counts.every((count) => count === 0);
      });
      const again = await store.claim(request());
      expect(again).toMatchObject({ status: 'claimed', takeover: false });
      expect(again.record.version).toBe(1); // a new incarnation: fencing tells it by createdAt
      await expect(store.saveStep(token, 'late', 1)).rejects.toSatisfy(isLeaseLostError);
    });

    it('fences out a holder whose lease ran out on the server clock and was taken over', async () => {
      const { store } = fresh();
      const zombie = claimedToken(await store.claim(request({ leaseMs: 200 })));
      await store.saveStep(zombie, 'charge', { id: 'ch_1' });
      const takeover = await until(
        'the lease to run out on the server',
        () => store.claim(request({ leaseMs: 30_000 })),
        (claim) => claim.status === 'claimed',
      );
      expect(takeover).toMatchObject({ status: 'claimed', takeover: true });
      expect(takeover.record).toMatchObject({ version: 2, steps: { charge: { id: 'ch_1' } } });
      await expect(
        store.complete(zombie, { kind: 'success', value: 'zombie' }, 60_000),
      ).rejects.toSatisfy(isLeaseLostError);
      await store.complete(
        leaseTokenOf(takeover.record),
        { kind: 'success', value: 'taker' },
        60_000,
      );
      const replay = await store.claim(request());
      expect(replay.record.outcome).toEqual({ kind: 'success', value: 'taker' });
    });

    it('runs every script again after SCRIPT FLUSH (NOSCRIPT, then EVAL)', async () => {
      const { store } = fresh();
      const cached = async () =>
        Promise.all(
          subject().nodes.map(
            async (node) =>
              ((await node.sendCommand(['SCRIPT', 'EXISTS', scripts.claim.sha1])) as number[])[0],
          ),
        );
      await flushScripts();
      expect((await cached()).every((exists) => Number(exists) === 0)).toBe(true);
      const token = claimedToken(await store.claim(request()));
      // A key in progress is the claim script's on every client (a new one may be a plain SET).
      expect((await store.claim(request())).status).toBe('in_progress');
      expect((await cached()).some((exists) => Number(exists) === 1)).toBe(true);
      await flushScripts();
      await store.saveStep(token, 'reserve', true);
      await flushScripts();
      await store.heartbeat(token, 30_000);
      await flushScripts();
      await store.complete(token, { kind: 'success', value: 7 }, 60_000);
      await flushScripts();
      expect(await store.get(token.scope, token.key)).toMatchObject({
        status: 'completed',
        steps: { reserve: true },
      });
      await flushScripts();
      expect((await store.claim(request())).status).toBe('replay');
    });

    it('gives 100 concurrent claims of one key one winner on the server clock', async () => {
      const { store } = fresh();
      const results = await Promise.all(
        Array.from({ length: 100 }, () => store.claim(request({ key: 'hot' }))),
      );
      const statuses = results.map((result) => result.status);
      expect(statuses.filter((status) => status === 'claimed')).toHaveLength(1);
      expect(statuses.filter((status) => status === 'in_progress')).toHaveLength(99);
    });

    it('keeps apart (scope, key) pairs that a naive key would merge', async () => {
      const { store } = fresh();
      const pairs: [string, string][] = [
        ['a:b', 'c'],
        ['a', 'b:c'],
        ['x}', 'y'],
        ['x', '}y'],
        ['{t}', 'k'],
        ['%007Bt%007D', 'k'],
        ['\uD800', 'k'],
        ['\uDC00', 'k'],
        ['\uFFFD', 'k'],
        ['\uD83D\uDE00', 'k'],
        ['', 'k'],
        ['k', ''],
      ];
      const results = await Promise.all(
        pairs.map(([scope, key], index) =>
          store.claim(request({ scope, key, fingerprint: `fp-${index}` })),
        ),
      );
      expect(results.map((result) => result.status)).toEqual(pairs.map(() => 'claimed'));
      for (const [index, [scope, key]] of pairs.entries()) {
        expect((await store.get(scope, key))?.fingerprint).toBe(`fp-${index}`);
      }
    });

    it('refuses a key prefix holding a brace, and a lease that is not a positive number', async () => {
      let refused: unknown;
      try {
        redisStore(subject().client, { keyPrefix: 'idem:{x}' });
      } catch (error) {
        refused = error;
      }
      expect(isConfigurationError(refused), String(refused)).toBe(true);
      await expect(fresh().store.claim(request({ leaseMs: Number.NaN }))).rejects.toSatisfy(
        isConfigurationError,
      );
    });
  });
}
