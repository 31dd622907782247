import { createIdempotency } from '@idem/core';
import { drizzleStore } from '@idem/server/postgres';
import { drizzle } from 'drizzle-orm/postgres-js';
import postgres from 'postgres';
import { quiet } from '../lib/config.js';
import { median } from '../lib/stats.js';
import { formatRate, formatRatio, verdictAtLeast } from '../lib/table.js';
import { callsPerSecond } from '../lib/workers.js';
import { judged, type RunContext } from './RunContext.js';

const SCOPE = 'tenant:bench/pgengine';
const INPUT = { path: 'orders.create', input: { sku: 'tea', quantity: 1, ref: 'pgengine' } };
const RESULT = { orderId: 1, sku: 'tea', quantity: 1 };
const FINGERPRINT = 'f'.repeat(64);
const TARGET = 0.8;

/** Both sides of one round: keys per second of the first calls, and of their replays. */
interface Round {
  first: number;
  replay: number;
}

/** A side of the comparison: the first call of a new key, and a replay of a completed one. */
interface Side {
  first(key: string): Promise<void>;
  replay(key: string): Promise<void>;
}

const handler = async () => RESULT;

/**
 * Engine on Postgres vs its floor: `createIdempotency` on `drizzleStore` (postgres-js),
 * `concurrency` calls in flight, against the same two statements sent bare through the same
 * client (an `INSERT … ON CONFLICT DO NOTHING` claim, then the fenced `UPDATE` completion;
 * a replay is one read of the row), with no idem code. Each round runs `keys` new keys,
 * then replays them all; rounds are interleaved (engine then floor, floor then engine, …)
 * so a change in the machine's load hits both alike, and each round's ratio is printed. The
 * ratios are the medians of the per-round ratios.
 *
 * `BENCH_PG_KEYS`, `BENCH_PG_ROUNDS`, `BENCH_PG_CONCURRENCY` change the defaults
 * (1,000 keys, 9 rounds, 16 in flight).
 */
export async function pgEngine(context: RunContext): Promise<void> {
  const { quick } = context;
  // Nine short rounds rather than three long ones: a round's ratio moves with what the
  // machine does in that second (a commit's fsync, autovacuum), and the median of nine
  // paired rounds is steadier than that of three.
  const keys = Number(process.env.BENCH_PG_KEYS ?? (quick ? 300 : 1_000));
  const rounds = Number(process.env.BENCH_PG_ROUNDS ?? (quick ? 1 : 9));
  const concurrency = Number(process.env.BENCH_PG_CONCURRENCY ?? 16);
  const runId = Math.random().toString(36).slice(2, 8);
  const client = postgres(context.databaseUrl, { ...quiet, max: concurrency });
  try {
    const sides = { engine: engineSide(client), floor: floorSide(client) };
    const results = { engine: [] as Round[], floor: [] as Round[] };
    const runRound = async (name: keyof typeof sides, tag: string) => {
      const side = sides[name];
      const keyOf = (index: number) => `${runId}-${tag}-${index}`;
      const first = await callsPerSecond(concurrency, keys, (index) => side.first(keyOf(index)));
      const replay = await callsPerSecond(concurrency, keys, (index) => side.replay(keyOf(index)));
      return { first, replay };
    };
    // Warm-up (every connection's prepared statements; the JIT, which takes the engine's
    // code about three rounds of 1,000 keys to reach its steady cost per call), not measured.
    for (let round = 0; round < (quick ? 1 : 3); round++) {
      await runRound('engine', `warm-E${round}`);
      await runRound('floor', `warm-F${round}`);
    }
    for (let round = 0; round < rounds; round++) {
      // The floor second in one round and first in the next: whatever one side leaves
      // behind for the other (dead rows, a checkpoint, autovacuum) falls on each alike.
      let floor: Round | undefined;
      if (round % 2 === 1) floor = await runRound('floor', `F${round}`);
      const engine = await runRound('engine', `E${round}`);
      floor ??= await runRound('floor', `F${round}`);
      results.engine.push(engine);
      results.floor.push(floor);
      context.log(
        `engine on Postgres, round ${round + 1}/${rounds}: first call ${rate(engine.first)} vs floor ${rate(floor.first)} (${formatRatio(engine.first / floor.first)}), replay ${rate(engine.replay)} vs ${rate(floor.replay)} (${formatRatio(engine.replay / floor.replay)})`,
      );
    }
    report(context, results, concurrency, keys);
  } finally {
    await client.end({ timeout: 5 });
  }
}

const rate = (perSecond: number) => formatRate(perSecond, 'keys/s');

function report(
  context: RunContext,
  results: Record<'engine' | 'floor', Round[]>,
  concurrency: number,
  keys: number,
) {
  const scenario = `engine on Postgres (${concurrency} in flight, ${keys} keys)`;
  for (const phase of ['first', 'replay'] as const) {
    const ratios = results.engine.map((round, index) => {
      const floor = results.floor[index];
      if (!floor) throw new Error(`round ${index + 1} has no floor`);
      return round[phase] / floor[phase];
    });
    const ratio = median(ratios);
    const what = phase === 'first' ? 'first call' : 'replay';
    context.report({
      scenario,
      variant:
        phase === 'first'
          ? 'floor: INSERT … ON CONFLICT claim + UPDATE completion, bare'
          : 'floor: replay, one read, bare',
      result: rate(median(results.floor.map((round) => round[phase]))),
      ratio: formatRatio(1),
    });
    context.report({
      scenario,
      variant: `${what}: createIdempotency + drizzleStore`,
      result: rate(median(results.engine.map((round) => round[phase]))),
      ratio: formatRatio(ratio),
      target: `≥ ${TARGET.toFixed(2)}× floor`,
      verdict: judged(context, verdictAtLeast(ratio, TARGET)),
      note: `rounds ${ratios.map(formatRatio).join(', ')}`,
    });
  }
}

/** The engine as an app runs it: a claim, the handler, a fenced completion; or a replay. */
function engineSide(client: postgres.Sql): Side {
  const engine = createIdempotency({ store: drizzleStore(drizzle(client)) });
  const call = (key: string) => engine.execute({ scope: SCOPE, key, input: INPUT }, handler);
  return {
    async first(key) {
      const { replayed } = await call(key);
      if (replayed) throw new Error(`engine: a new key ${key} was replayed`);
    },
    async replay(key) {
      const { replayed } = await call(key);
      if (!replayed) throw new Error(`engine: a completed key ${key} ran again`);
    },
  };
}

/** The least any store-backed engine sends: the claim and the completion; a read to replay. */
function floorSide(client: postgres.Sql): Side {
  return {
    async first(key) {
      const [claimed] = await client`insert into idem_keys (scope, key, fingerprint, status,
          version, locked_until, attempts, steps, created_at, expires_at)
        values (${SCOPE}, ${key}, ${FINGERPRINT}, 'in_progress', 1,
          now() + interval '30 seconds', 1, '{}', now(), now() + interval '1 day')
        on conflict do nothing returning version, created_at`;
      if (!claimed) throw new Error(`floor: key ${key} exists`);
      const value = await handler();
      const completed = await client`update idem_keys set status = 'completed',
          outcome = ${JSON.stringify({ kind: 'success', value })}::json,
          completed_at = now(), locked_until = null
        where scope = ${SCOPE} and key = ${key} and version = ${claimed.version}
          and created_at = ${claimed.created_at} and status = 'in_progress'
        returning version`;
      if (completed.length !== 1) throw new Error(`floor: lost key ${key}`);
    },
    async replay(key) {
      const [row] = await client`select fingerprint, status, outcome from idem_keys
        where scope = ${SCOPE} and key = ${key}`;
      if (row?.status !== 'completed' || row.fingerprint !== FINGERPRINT) {
        throw new Error(`floor: key ${key} is not completed`);
      }
    },
  };
}
