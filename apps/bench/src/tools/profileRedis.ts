/**
 * `tsx src/tools/profileRedis.ts <idem|idem2|peer|floor> [inFlight=16] [keys=20000] [rounds=3]`:
 * one contender of the `redis-peers` scenario alone on a throwaway `redis-server`, first
 * calls then replays of `keys` new keys per round, `inFlight` at a time; prints calls/s
 * and what Redis did per call (`INFO commandstats`). For profiles of where a call's time
 * goes: run it under `node --cpu-prof --conditions=@idem/source --import tsx …` or
 * `valgrind --tool=callgrind node …` (instruction counts do not depend on the machine's load).
 */
import { startRedisServer } from '@idem/redis/testing';
import { createClient } from 'redis';
import {
  type Contender,
  floorContender,
  idemContender,
  nodeIdempotencyContender,
} from '../lib/redisContenders.js';
import { redisServerCpu } from '../lib/redisProbe.js';
import { callsPerSecond } from '../lib/workers.js';

const CONTENDERS: Record<string, (url: string) => Promise<Contender>> = {
  idem: idemContender,
  idem2: (url) => idemContender(url, 2),
  peer: nodeIdempotencyContender,
  floor: floorContender,
};

const [name = 'idem', inFlightArg = '16', keysArg = '20000', roundsArg = '3'] =
  process.argv.slice(2);
const make = CONTENDERS[name];
if (!make)
  throw new Error(
    `profileRedis: no contender "${name}"; one of idem, idem2 (on two connections), peer, floor`,
  );
const [inFlight, keys, rounds] = [inFlightArg, keysArg, roundsArg].map(Number) as [
  number,
  number,
  number,
];

const server = await startRedisServer();
const admin = await createClient({ url: server.url }).connect();
const contender = await make(server.url);

const stats = async () => {
  const info = await admin.info('commandstats');
  const lines = [...info.matchAll(/cmdstat_(\w+):calls=(\d+),usec=(\d+)/g)];
  return new Map(lines.map(([, command, calls, usec]) => [command, [Number(calls), Number(usec)]]));
};

try {
  for (let round = 0; round < rounds; round++) {
    for (const phase of ['first', 'replay'] as const) {
      const before = await stats();
      const serverBefore = await redisServerCpu(admin);
      const cpuBefore = process.cpuUsage();
      const rate = await callsPerSecond(inFlight, keys, (index) =>
        contender[phase](`r${round}-${index}`),
      );
      const cpu = process.cpuUsage(cpuBefore);
      const serverMicros = (await redisServerCpu(admin)) - serverBefore;
      const after = await stats();
      const perCall = [...after]
        .filter(([command]) => command !== 'info')
        .map(([command, [calls = 0, usec = 0] = []]) => {
          const [callsBefore = 0, usecBefore = 0] = before.get(command) ?? [];
          return [command, (calls - callsBefore) / keys, (usec - usecBefore) / keys] as const;
        })
        .filter(([, calls]) => calls > 0)
        .map(([command, calls, usec]) => `${command} ${calls.toFixed(1)}× ${usec.toFixed(1)} µs`);
      console.log(
        `${name} ${inFlight} in flight, round ${round + 1} ${phase}: ${Math.round(rate)} calls/s; CPU per call: client ${((cpu.user + cpu.system) / keys).toFixed(1)} µs, redis-server ${(serverMicros / keys).toFixed(1)} µs; commands: ${perCall.join(', ')}`,
      );
    }
  }
} finally {
  await contender.close();
  await admin.close();
  await server.stop();
}
