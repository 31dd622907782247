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
 * node-redis client (`createClient()` or `createCluster()`, connected).
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
 */
export function redisStore(
  client: RedisConnection,
  options: RedisStoreOptions = {},
): IdempotencyStore {
  const prefix = keyPrefixOf(options.keyPrefix);
  const { clock } = options;
  const { script: send, command } = redisSenders(client);
  /** ARGV[1] and ARGV[2] of every script: the injected "now" (or the server's), and expiry. */
  const time = (): [string, string] => (clock ? [String(clock.now()), '0'] : ['', '1']);
  /** Runs `script` on the record `(scope, key)`: the time, then `args`. */
  const run = (script: LuaScript, scope: string, key: string, ...args: string[]) =>
    send(script, recordKey(prefix, scope, key), [...time(), ...args]);
  const plainClaim =
    command &&
    newKeyClaim(
      command,
      clock,
      // node-redis queues commands while it reconnects (`isReady` false meanwhile).
      () => (client as { isReady?: unknown }).isReady !== false,
    );

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
      sweepRecords(client, send, prefix, limit, time),
  };
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
