/**
 * `tsx src/tools/redisFenceBound.ts [inFlight=16] [keys=20000] [rounds=9]`: how fast any
 * fenced Redis store could make a new key's first call on a server without a conditional
 * SET of its own (Redis before 8.4, Valkey before 8.1), beside idem and node-idempotency,
 * rounds alternated on one throwaway `redis-server`; prints each round and the medians.
 *
 * The bound is `createIdempotency` on a store that does the least a fenced first call can:
 * the claim as idem's plain one (`SET … NX PX … GET` and `PEXPIRETIME`, sent together), and
 * a completion that is the least compare-and-set Lua can be, one `GET` compared with the
 * exact text the claim wrote (a random nonce in it) and one `SET … PX`, the completed
 * record built in the client on its own clock. It is not a store (no takeover, no replay,
 * no server time in the completion); only the cost of its first call means anything.
 */
import { createHash, randomBytes } from 'node:crypto';
import { createIdempotency, LeaseLostError } from '@idem/core';
import { claimedNew, type IdempotencyStore } from '@idem/core/store';
import { redisStore } from '@idem/redis';
import { startRedisServer } from '@idem/redis/testing';
import { createClient } from 'redis';
import {
  BODY,
  type Contender,
  idemContender,
  nodeIdempotencyContender,
  RESULT,
} from '../lib/redisContenders.js';
import { redisServerCpu } from '../lib/redisProbe.js';
import { median } from '../lib/stats.js';
import { callsPerSecond } from '../lib/workers.js';

const LEAST_CAS = `if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return 1
end
return 0`;
const LEAST_CAS_SHA = createHash('sha1').update(LEAST_CAS).digest('hex');

async function fenceBound(url: string): Promise<Contender> {
  const client = await createClient({ url, commandOptions: { timeout: 0 } }).connect();
  await client.sendCommand(['SCRIPT', 'LOAD', LEAST_CAS]);
  const send = (args: string[]) => client.sendCommand(args);
  /** What each claim wrote, by Redis key, for its completion to compare, and its fingerprint. */
  const written = new Map<string, { text: string; fingerprint: string }>();
  // Unique per claim without a random draw each: this process's random prefix and a count.
  const incarnation = randomBytes(9).toString('base64');
  let claims = 0;
  const redisKeyOf = (scope: string, key: string) => `bound:{${scope}\u0000${key}}`;
  // The methods a first call never reaches (release, heartbeat, get, …) are redisStore's.
  const store: IdempotencyStore = {
    ...redisStore(client),
    async claim(request) {
      const redisKey = redisKeyOf(request.scope, request.key);
      const px = Math.max(request.leaseMs, request.ttlMs) - 1;
      const fingerprint = JSON.stringify(request.fingerprint);
      const text = `in_progress 1 @${px}+${request.leaseMs}+${request.ttlMs} 1 - ${incarnation}.${claims++}\n${fingerprint}\n\n`;
      const [reply, expiry] = await Promise.all([
        send(['SET', redisKey, text, 'NX', 'PX', String(px), 'GET']),
        send(['PEXPIRETIME', redisKey]),
      ]);
      if (reply !== null) throw new Error(`fence bound: ${request.key} was claimed twice`);
      written.set(redisKey, { text, fingerprint });
      return claimedNew(request, Number(expiry) - px);
    },
    async complete(token, outcome, ttlMs) {
      const redisKey = redisKeyOf(token.scope, token.key);
      const claimed = written.get(redisKey) ?? { text: '', fingerprint: '' };
      written.delete(redisKey);
      const now = Date.now();
      const completed = `completed 1 ${token.createdAt} - ${now + ttlMs} 1 ${now}\n${claimed.fingerprint}\n${JSON.stringify(outcome)}\n`;
      const done = await send([
        'EVALSHA',
        LEAST_CAS_SHA,
        '1',
        redisKey,
        claimed.text,
        completed,
        String(ttlMs),
      ]);
      if (Number(done) !== 1) throw new LeaseLostError(token.scope, token.key, token.version);
    },
  };
  const idempotency = createIdempotency({ store });
  const scope = 'tenant:bench/orders.create';
  return {
    name: 'bound: the least fenced first call in Lua',
    async first(key) {
      const result = await idempotency.execute({ scope, key, input: BODY }, async () => RESULT);
      if (result.replayed) throw new Error(`fence bound: the first call of ${key} was a replay`);
    },
    replay: async () => {
      throw new Error('fence bound: measures first calls only');
    },
    close: () => client.close(),
  };
}

const [inFlight = 16, keys = 20_000, rounds = 9] = process.argv.slice(2).map(Number);
const server = await startRedisServer();
const admin = await createClient({ url: server.url }).connect();
const contenders = [
  ['idem', await idemContender(server.url)],
  ['node-idempotency', await nodeIdempotencyContender(server.url)],
  ['bound', await fenceBound(server.url)],
] as const;
const rates = new Map<string, number[]>(contenders.map(([name]) => [name, []]));
try {
  // Round 0 warms every contender up and is not counted.
  for (let round = 0; round <= rounds; round++) {
    const order = round % 2 === 0 ? contenders : [...contenders].reverse();
    for (const [name, contender] of order) {
      const serverBefore = await redisServerCpu(admin);
      const cpuBefore = process.cpuUsage();
      const rate = await callsPerSecond(inFlight, keys, (index) =>
        contender.first(`${name}-${round}-${index}`),
      );
      const cpu = process.cpuUsage(cpuBefore);
      const serverMicros = ((await redisServerCpu(admin)) - serverBefore) / keys;
      if (round === 0) continue;
      rates.get(name)?.push(rate);
      console.log(
        `round ${round} ${name}: ${Math.round(rate)} first calls/s; CPU per call: client ${((cpu.user + cpu.system) / keys).toFixed(1)} µs, redis-server ${serverMicros.toFixed(1)} µs`,
      );
    }
  }
  const peer = rates.get('node-idempotency') ?? [];
  for (const name of ['idem', 'bound']) {
    const own = rates.get(name) ?? [];
    const ratios = own.map((rate, round) => rate / (peer[round] as number));
    console.log(
      `${name} / node-idempotency: median ${median(ratios).toFixed(2)}× (rounds ${ratios.map((ratio) => ratio.toFixed(2)).join(', ')})`,
    );
  }
} finally {
  for (const [, contender] of contenders) await contender.close();
  await admin.close();
  await server.stop();
}
