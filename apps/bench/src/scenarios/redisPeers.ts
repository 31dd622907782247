import { startRedisServer } from '@idem/redis/testing';
import { createClient } from 'redis';
import {
  type Contender,
  floorContender,
  idemContender,
  nodeIdempotencyContender,
} from '../lib/redisContenders.js';
import { median, nowMs, perRound, summarize } from '../lib/stats.js';
import { formatMs, formatRate, formatRatio, verdictAtLeast } from '../lib/table.js';
import { judged, type RunContext } from './RunContext.js';

type Phase = 'first' | 'replay';

/** One contender's phase in one round: calls/s, latencies, and what Redis did per call. */
interface PhaseResult {
  perSecond: number;
  latencies: number[];
  commandsPerCall: number;
  serverMicrosPerCall: number;
}

/** Targets against node-idempotency and against the floor, by calls in flight. */
const TARGETS: Record<number, { peer: number; floor?: number }> = {
  16: { peer: 1.0, floor: 0.8 },
  1: { peer: 1.0 },
};

/** Commands Redis ran and the µs it spent in them, from `INFO commandstats`. */
async function commandStats(admin: { info(section: string): Promise<string> }) {
  const info = await admin.info('commandstats');
  let calls = 0;
  let micros = 0;
  for (const [, name, count, usec] of info.matchAll(/cmdstat_(\w+):calls=(\d+),usec=(\d+)/g)) {
    if (name === 'info') continue;
    calls += Number(count);
    micros += Number(usec);
  }
  return { calls, micros };
}

/** `keys.length` calls of `call`, `inFlight` at a time, each key once. */
async function runKeys(
  inFlight: number,
  keys: readonly string[],
  call: (key: string) => Promise<void>,
): Promise<{ perSecond: number; latencies: number[] }> {
  const latencies: number[] = [];
  let next = 0;
  const started = nowMs();
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      for (let index = next++; index < keys.length; index = next++) {
        const begun = nowMs();
        await call(keys[index] as string);
        latencies.push(nowMs() - begun);
      }
    }),
  );
  return { perSecond: (keys.length / (nowMs() - started)) * 1000, latencies };
}

/**
 * idem's Redis store against node-idempotency on the same `redis-server` (one started
 * here, no persistence), and against the floor of bare `SET NX` + `SET` (first call) /
 * `GET` (replay): N new keys per round, first calls then their replays, at 16 and at 1
 * call in flight, each contender on connections of its own: idem on two, as its README
 * has it for concurrent calls (judged), and on one (shown beside it), the peer and the
 * floor on one each. Rounds interleave the contenders
 * (a different one first each round), so all see the same machine load; ratios are
 * medians of per-round ratios. Each row's note says what Redis did per call (`INFO
 * commandstats`: commands and server µs).
 */
export async function redisPeers(context: RunContext): Promise<void> {
  const { quick } = context;
  const keysPerRound = Number(process.env.BENCH_REDIS_KEYS ?? (quick ? 200 : 2_000));
  const rounds = Number(process.env.BENCH_REDIS_ROUNDS ?? (quick ? 1 : 3));
  const server = await startRedisServer();
  const admin = await createClient({ url: server.url }).connect();
  const contenders: Contender[] = [];
  try {
    contenders.push(
      await floorContender(server.url),
      await nodeIdempotencyContender(server.url),
      await idemContender(server.url, 2),
      await idemContender(server.url, 1),
    );
    for (const inFlight of [16, 1]) {
      const results = new Map<Contender, Record<Phase, PhaseResult[]>>(
        contenders.map((contender) => [contender, { first: [], replay: [] }]),
      );
      const phase = async (contender: Contender, name: Phase, keys: string[]) => {
        const before = await commandStats(admin);
        const run = await runKeys(inFlight, keys, (key) => contender[name](key));
        const after = await commandStats(admin);
        return {
          ...run,
          commandsPerCall: (after.calls - before.calls) / keys.length,
          serverMicrosPerCall: (after.micros - before.micros) / keys.length,
        };
      };
      // Warm-up rounds as long as the measured ones, not measured: idem has the most code
      // for the JIT to bring to its steady cost, and one short warm-up left it below.
      const warmUps = quick ? 1 : 3;
      for (let round = -warmUps; round < rounds; round++) {
        const warmUp = round < 0;
        context.log(
          `redis peers, ${inFlight} in flight: ${warmUp ? 'warm-up' : `round ${round + 1}/${rounds}`}`,
        );
        const shift = Math.max(0, round) % contenders.length;
        for (const contender of [...contenders.slice(shift), ...contenders.slice(0, shift)]) {
          // Keys of their own: idem's two contenders share the server and the key prefix.
          const of = contenders.indexOf(contender);
          const keys = Array.from(
            { length: keysPerRound },
            (_, i) => `k${inFlight}-${round}-${of}-${i}`,
          );
          const first = await phase(contender, 'first', keys);
          const replay = await phase(contender, 'replay', keys);
          if (warmUp) continue;
          results.get(contender)?.first.push(first);
          results.get(contender)?.replay.push(replay);
        }
      }
      reportLevel(context, inFlight, contenders, results);
    }
  } finally {
    for (const contender of contenders) await contender.close();
    await admin.close();
    await server.stop();
  }
}

function reportLevel(
  context: RunContext,
  inFlight: number,
  contenders: readonly Contender[],
  results: Map<Contender, Record<Phase, PhaseResult[]>>,
): void {
  type Subject = { contender: Contender; result: Record<Phase, PhaseResult[]> };
  const [floor, peer, idem, idemOnOne] = contenders.map((contender) => {
    const result = results.get(contender);
    if (!result) throw new Error(`no results for ${contender.name}`);
    return { contender, result };
  }) as [Subject, Subject, Subject, Subject];
  const target = TARGETS[inFlight] ?? { peer: 1 };
  for (const name of ['first', 'replay'] as const) {
    const ratioTo = (measured: PhaseResult[], base: PhaseResult[]) =>
      median(perRound(measured, base, (value, of) => value.perSecond / of.perSecond));
    const row = (subject: Subject) => {
      const phases = subject.result[name];
      const latency = summarize(phases.flatMap((phase) => phase.latencies));
      const commands = median(phases.map((phase) => phase.commandsPerCall));
      const micros = median(phases.map((phase) => phase.serverMicrosPerCall));
      return {
        scenario: `redis vs node-idempotency (${inFlight} in flight, ${name === 'first' ? 'first call' : 'replay'})`,
        variant: subject.contender.name,
        result: formatRate(median(phases.map((phase) => phase.perSecond)), 'calls/s'),
        p50: formatMs(latency.p50),
        p99: formatMs(latency.p99),
        ratio: formatRatio(ratioTo(phases, floor.result[name])),
        note: `Redis per call: ${commands.toFixed(1)} commands, ${micros.toFixed(1)} µs`,
      };
    };
    context.report(row(floor));
    context.report(row(peer));
    /** idem's row, its ratio to node-idempotency leading the note. */
    const idemRowOf = (subject: Subject) => {
      const measured = row(subject);
      const toPeer = ratioTo(subject.result[name], peer.result[name]);
      return {
        toPeer,
        row: { ...measured, note: `${formatRatio(toPeer)} node-idempotency; ${measured.note}` },
      };
    };
    const judgedIdem = idemRowOf(idem);
    const toFloor = ratioTo(idem.result[name], floor.result[name]);
    const met =
      judgedIdem.toPeer >= target.peer && (target.floor === undefined || toFloor >= target.floor);
    context.report({
      ...judgedIdem.row,
      target: `≥ ${target.peer.toFixed(2)}× peer${target.floor === undefined ? '' : `, ≥ ${target.floor.toFixed(2)}× floor`}`,
      verdict: judged(context, verdictAtLeast(met ? 1 : 0, 1)),
    });
    context.report(idemRowOf(idemOnOne).row);
  }
}
