import { type Clock, ConfigurationError, type JsonValue, LeaseLostError } from '@idem/core';
import {
  type ClaimRequest,
  type ClaimResult,
  type IdempotencyRecord,
  type IdempotencyStore,
  isExpired,
  type LeaseToken,
  requirePositive,
  type StoredOutcome,
  type SweepOptions,
} from '@idem/core/store';
import { newKeyClaim } from './newKeyClaim.js';
import {
  isReady,
  type RedisConnection,
  redisSenders,
  type ScriptSender,
  scanKeys,
} from './RedisConnection.js';
import { recordKey, recordKeyPattern } from './recordKey.js';
import { claimResultOf, recordOf } from './scriptReplies.js';
import { type LuaScript, scripts } from './scripts.js';

export interface RedisStoreOptions {
  /**
   * What every record's Redis key starts with. Keys are `<keyPrefix>{<scope and key>}`: the
   * braces are the Redis Cluster hash tag, so the prefix must hold no `{` or `}`.
   * @default 'idem:'
   */
  keyPrefix?: string;
  /**
   * Where "now" comes from for leases and expiry.
   *
   * By default the store reads the REDIS SERVER's clock (`TIME`, inside each script), so
   * every app server judges leases by one clock, and Redis deletes each record (`PEXPIRE`)
   * the moment it expires. A new key claimed without a script is stamped with the
   * server's millisecond of its `SET` (read back from the key's expiry).
   *
   * With a `clock` the scripts use that clock's `now()` instead, as the conformance tests
   * do with a `manualClock`; Redis cannot expire keys by a clock it does
   * not know, so records then stay until `sweep` deletes them or a claim resets them.
   * @default the Redis server's clock
   */
  clock?: Clock;
}

/**
 * An `IdempotencyStore` in Redis or Valkey, on one node or a Redis Cluster, through a
 * node-redis client (`createClient()` or `createCluster()`, connected), or through several
 * clients of one kind to the same Redis: a command goes on the connection with the fewest
 * commands in flight, unless its key has some in flight, which it then follows, so one key's
 * commands keep their order (see `redisSenders`). Under many concurrent calls, two
 * connections let Redis run one connection's commands while this process handles the
 * other's replies; the store neither opens nor closes them.
 *
 * `claim`, `complete`, `release`, `heartbeat`, `saveStep`, `get` and each key of a `sweep`
 * are one Lua script each (`EVALSHA`, and `EVAL` once when the server does not have it
 * cached), atomic on the server and touching one key: one round trip per call. On a
 * one-node client, a new key's claim and a replay are one plain `SET … NX … GET` instead
 * (see `newKeyClaim`). One record is one Redis string, recovery points included: one `GET`
 * and at most one `SET` a call.
 *
 * @example
 * const client = await createClient({ url: process.env.REDIS_URL }).connect();
 * const store = redisStore(client);
 * // or, for many concurrent calls: redisStore([client, await client.duplicate().connect()])
 */
export function redisStore(
  connection: RedisConnection | readonly RedisConnection[],
  options: RedisStoreOptions = {},
): IdempotencyStore {
  const clients = connectionsOf(connection);
  const prefix = keyPrefixOf(options.keyPrefix);
  const { clock } = options;
  const { script: send, command } = redisSenders(clients);
  /** ARGV[1] and ARGV[2] of every script: the injected "now" (or the server's), and expiry. */
  const time = (): [string, string] => (clock ? [String(clock.now()), '0'] : ['', '1']);
  /** Runs `script` on the record `(scope, key)`: the time, then `args`. */
  const run = (script: LuaScript, scope: string, key: string, ...args: string[]) =>
    send(script, recordKey(prefix, scope, key), [...time(), ...args]);
  // node-redis queues commands while it reconnects (`isReady` false meanwhile).
  const ready = () => clients.every(isReady);
  const plainClaim = command && newKeyClaim(command, clock, ready);

  // Where new keys are claimed by a plain SET, most completions find the record it wrote.
  const completeScript = () => (plainClaim?.active ? 'completeNewKey' : 'complete');

  const fenced = async (token: LeaseToken, script: keyof typeof scripts, ...args: string[]) => {
    const { scope, key, version, createdAt } = token;
    const done = await run(
      scripts[script],
      scope,
      key,
      String(version),
      String(createdAt),
      ...args,
    );
    if (Number(done) !== 1) throw new LeaseLostError(scope, key, version);
  };

  return {
    async claim(request: ClaimRequest): Promise<ClaimResult> {
      requirePositive('leaseMs', request.leaseMs, { unit: 'milliseconds' });
      requirePositive('ttlMs', request.ttlMs, { unit: 'milliseconds' });
      const redisKey = recordKey(prefix, request.scope, request.key);
      const plain = await plainClaim?.(request, redisKey);
      if (plain !== undefined) return plain;
      const reply = await send(scripts.claim, redisKey, [
        ...time(),
        JSON.stringify(request.fingerprint),
        String(request.leaseMs),
        String(request.ttlMs),
      ]);
      return claimResultOf(request, reply);
    },

    async complete(token: LeaseToken, outcome: StoredOutcome, ttlMs: number): Promise<void> {
      requirePositive('ttlMs', ttlMs, { unit: 'milliseconds' });
      await fenced(token, completeScript(), JSON.stringify(outcome), String(ttlMs));
    },

    async release(token: LeaseToken): Promise<void> {
      await fenced(token, 'extend', '0');
    },

    async heartbeat(token: LeaseToken, leaseMs: number): Promise<void> {
      requirePositive('leaseMs', leaseMs, { unit: 'milliseconds' });
      await fenced(token, 'extend', String(leaseMs));
    },

    async saveStep(token: LeaseToken, name: string, value: JsonValue): Promise<void> {
      await fenced(token, 'saveStep', `[${JSON.stringify(name)},${JSON.stringify(value)}]`);
    },

    async get(scope: string, key: string): Promise<IdempotencyRecord | null> {
      const [now, stored] = (await run(scripts.read, scope, key)) as [unknown, unknown];
      const text = String(stored);
      if (text === '') return null;
      const record = recordOf(scope, key, text);
      return isExpired(record, Number(String(now))) ? null : record;
    },

    sweep: ({ limit }: SweepOptions): Promise<number> =>
      sweepRecords(clients.find(isReady) ?? clients[0], send, prefix, limit, time),
  };
}

/**
 * The clients the store sends through, or `ConfigurationError`: something that is not a
 * node-redis client, an empty list, or clients that differ in what decides the keys they
 * reach and the user they act as (`reach`): a record's key must mean the same key on every
 * one of them, and what one connection writes another must be allowed to read.
 */
function connectionsOf(
  connection: RedisConnection | readonly RedisConnection[],
): [RedisConnection, ...RedisConnection[]] {
  const list: readonly unknown[] = Array.isArray(connection) ? connection : [connection];
  const refuse = (problem: string) =>
    new ConfigurationError(
      `redisStore: ${problem}. Pass a connected node-redis client (createClient() or ` +
        'createCluster()), or an array of such clients of one kind to the same Redis.',
    );
  if (list.length === 0) throw refuse('got an empty array of clients');
  for (const [index, client] of list.entries()) {
    if (typeof (client as Partial<RedisConnection> | null)?.evalSha !== 'function') {
      const where = Array.isArray(connection) ? ` at index ${index}` : '';
      throw refuse(
        `got ${shown(client)}${where}, which is not a node-redis client (nor is an ioredis one)`,
      );
    }
  }
  const [expected, ...others] = list.map(reach);
  for (const [index, traits] of others.entries()) {
    for (const [trait, value] of Object.entries(traits)) {
      const wanted = expected?.[trait as keyof Reach];
      if (value === wanted) continue;
      throw refuse(
        `got clients that differ in their ${trait}: ${wanted} at index 0, ${value} at index ${index + 1} (every connection must reach the same keys, as the same user)`,
      );
    }
  }
  // A copy: the caller may change its array later.
  return [...list] as [RedisConnection, ...RedisConnection[]];
}

/** What decides which keys a client reaches, and as whom. */
interface Reach {
  kind: string;
  'key prefix': string;
  database: string;
  user: string;
}

/**
 * A node-redis client's kind, key prefix, database and user, as its options give them (a
 * URL's too: node-redis reads them into its options).
 */
function reach(client: unknown): Reach {
  const { _keyPrefix, options } = client as {
    _keyPrefix?: unknown;
    options?: { database?: unknown; username?: unknown; defaults?: { username?: unknown } };
  };
  return {
    kind: 'masters' in (client as object) ? 'a cluster client' : 'a one-node client',
    'key prefix': JSON.stringify(String(_keyPrefix ?? '')),
    database: String(options?.database ?? 0),
    user: JSON.stringify(String(options?.username ?? options?.defaults?.username ?? 'default')),
  };
}

/** A value that is not a client, as an error message names it. */
function shown(value: unknown): string {
  if (value === null || value === undefined) return String(value);
  if (typeof value === 'function') return 'a function';
  if (typeof value === 'object') return Array.isArray(value) ? 'an array' : 'an object';
  return typeof value === 'string'
    ? `the string ${JSON.stringify(value).slice(0, 60)}`
    : `${typeof value} ${String(value)}`;
}

/** The key prefix, or `ConfigurationError` when it could break the Cluster hash tag. */
function keyPrefixOf(keyPrefix: string | undefined): string {
  const prefix = keyPrefix ?? 'idem:';
  if (typeof prefix !== 'string' || /[{}]/.test(prefix)) {
    throw new ConfigurationError(
      `redisStore: keyPrefix must be a string without "{" or "}" (they mark the Redis Cluster hash tag); got ${JSON.stringify(prefix)}.`,
    );
  }
  return prefix;
}

/** Deletes up to `limit` expired records under `prefix`, on every node; how many it deleted. */
async function sweepRecords(
  client: RedisConnection,
  send: ScriptSender,
  prefix: string,
  limit: number,
  time: () => [string, string],
): Promise<number> {
  if (!(limit >= 1)) return 0;
  let deleted = 0;
  // SCAN may name a key twice and lists keys that expire meanwhile: the script decides.
  for await (const keys of scanKeys(client, recordKeyPattern(prefix))) {
    for (let start = 0; start < keys.length && deleted < limit; ) {
      const batch = keys.slice(start, start + Math.floor(limit) - deleted);
      start += batch.length;
      const results = await Promise.all(batch.map((key) => send(scripts.sweepOne, key, time())));
      deleted += results.filter((result) => Number(result) === 1).length;
    }
    if (deleted >= limit) break;
  }
  return deleted;
}
