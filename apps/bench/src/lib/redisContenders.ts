import { createIdempotency } from '@idem/core';
import { redisStore } from '@idem/redis';
import { Idempotency as NodeIdempotency } from '@node-idempotency/core';
import { RedisStorageAdapter } from '@node-idempotency/storage-adapter-redis';
import { createClient } from 'redis';

/** The request every contender makes idempotent, and what its handler answers. */
export const BODY = { sku: 'tea', quantity: 1, ref: 'redis-peers' };
export const RESULT = { orderId: 1, sku: 'tea', quantity: 1 };
const TTL_MS = 86_400_000;

/** One way of making a call idempotent on Redis: a new key's first call, and its replay. */
export interface Contender {
  readonly name: string;
  /** The first call of `key`: claims it, runs the handler, stores the answer. */
  first(key: string): Promise<void>;
  /** A repeat of `key` after `first`: answers the stored result without running the handler. */
  replay(key: string): Promise<void>;
  close(): Promise<void>;
}

const handler = async () => RESULT;

function expectResult(name: string, key: string, value: unknown): void {
  if ((value as { orderId?: unknown } | undefined)?.orderId !== RESULT.orderId) {
    throw new Error(`${name}: ${key} answered ${JSON.stringify(value)}, not the stored result`);
  }
}

/**
 * idem as its README has a user run it: `createIdempotency({ store: redisStore(clients) })`
 * on `connections` connected node-redis clients (the README gives it two for many
 * concurrent calls), `execute` per call (claim → handler → complete; a repeat is one claim
 * that answers the stored outcome).
 */
export async function idemContender(url: string, connections = 1): Promise<Contender> {
  const clients = await Promise.all(
    Array.from({ length: connections }, () => createClient({ url }).connect()),
  );
  const idempotency = createIdempotency({ store: redisStore(clients) });
  const scope = 'tenant:bench/orders.create';
  return {
    name: `idem (createIdempotency + redisStore, ${connections === 1 ? 'one connection' : `${connections} connections`})`,
    async first(key) {
      const result = await idempotency.execute({ scope, key, input: BODY }, handler);
      if (result.replayed) throw new Error(`idem: the first call of ${key} was a replay`);
    },
    async replay(key) {
      const result = await idempotency.execute({ scope, key, input: BODY }, async () => {
        throw new Error(`idem: the replay of ${key} ran the handler`);
      });
      if (!result.replayed) throw new Error(`idem: the repeat of ${key} was not a replay`);
      expectResult('idem', key, result.value);
    },
    close: () => Promise.all(clients.map((client) => client.close())).then(() => {}),
  };
}

/**
 * node-idempotency as its README has a user run it: `new Idempotency(adapter)` with its
 * Redis adapter (`@node-idempotency/storage-adapter-redis`, its own node-redis 4 client),
 * `onRequest` before the handler and `onResponse` after it.
 */
export async function nodeIdempotencyContender(url: string): Promise<Contender> {
  const adapter = new RedisStorageAdapter({ url });
  await adapter.connect();
  const idempotency = new NodeIdempotency(adapter, { cacheTTLMS: TTL_MS });
  const request = (key: string) => ({
    method: 'POST',
    path: '/orders.create',
    headers: { 'idempotency-key': key },
    body: BODY,
  });
  return {
    name: 'node-idempotency (core + storage-adapter-redis)',
    async first(key) {
      const req = request(key);
      const stored = await idempotency.onRequest(req);
      if (stored) throw new Error(`node-idempotency: the first call of ${key} was a replay`);
      await idempotency.onResponse(req, { body: await handler(), additional: { status: 200 } });
    },
    async replay(key) {
      const stored = await idempotency.onRequest(request(key));
      if (!stored) throw new Error(`node-idempotency: the repeat of ${key} was not a replay`);
      expectResult('node-idempotency', key, stored.body);
    },
    close: () => adapter.disconnect(),
  };
}

/**
 * The floor: the commands no Redis design can do without, on idem's client library, with
 * no idempotency code. A first call is `SET key <in progress> NX PX` (the claim), the
 * handler, and `SET key <JSON of the answer> PX` (the completion); a replay is `GET key`
 * and `JSON.parse` of the answer. The client has node-redis's per-command timeout off.
 */
export async function floorContender(url: string): Promise<Contender> {
  // No per-command timeout (node-redis 6 arms one per command by default): the least cost.
  const client = await createClient({ url, commandOptions: { timeout: 0 } }).connect();
  const options = { PX: TTL_MS };
  return {
    name: 'floor: SET NX + SET / GET (node-redis, no idempotency code)',
    async first(key) {
      const redisKey = `floor:${key}`;
      const claimed = await client.set(redisKey, '{"status":"in_progress"}', {
        ...options,
        NX: true,
      });
      if (claimed !== 'OK') throw new Error(`floor: ${key} was claimed twice`);
      const value = await handler();
      await client.set(redisKey, JSON.stringify({ status: 'completed', value }), options);
    },
    async replay(key) {
      const stored = await client.get(`floor:${key}`);
      if (stored === null) throw new Error(`floor: ${key} is gone`);
      expectResult('floor', key, (JSON.parse(stored) as { value: unknown }).value);
    },
    close: () => client.close(),
  };
}
