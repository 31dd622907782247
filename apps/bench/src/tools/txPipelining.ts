/**
 * `tsx src/tools/txPipelining.ts [keys] [rounds] [concurrency]`: whether pipelining would
 * pay in transaction mode, measured on its floor's raw SQL (no idem code). Each key: the
 * read before the transaction, then in one transaction the claim, the procedure's INSERT and
 * the fenced completion. `awaited` sends each statement after the previous one answered (as
 * postgres-js `begin` does: `BEGIN`, then the callback, then `COMMIT`); `pipelined` sends
 * `BEGIN` with the claim and the completion with `COMMIT` in one write each, on a reserved
 * connection, waiting only for what the next statement needs. Interleaved rounds, keys/s
 * and CPU per key of this process and of the Postgres backends.
 */
import { randomUUID } from 'node:crypto';
import type postgres from 'postgres';
import { runMain } from '../lib/cleanup.js';
import { measuredDatabase } from '../lib/keysCpu.js';
import { CREATE_BENCH_TABLES } from '../server/schema.js';

const SCOPE = 'tenant:bench/tx';
const FP = 'f'.repeat(64);
const OUTCOME = JSON.stringify({ kind: 'success', value: { orderId: 1, sku: 'tea', quantity: 1 } });

const READ = 'select status, fingerprint, outcome from idem_keys where scope = $1 and key = $2';
const CLAIM = `insert into idem_keys (scope, key, fingerprint, status, version, locked_until,
    attempts, steps, created_at, expires_at)
  values ($1, $2, $3, 'in_progress', 1, now() + interval '30 seconds', 1, '{}', now(),
    now() + interval '1 day')
  on conflict do nothing returning version, created_at`;
const INSERT = `insert into bench_orders (principal, sku, quantity, ref) values ($1, 'tea', 1, $2)
  returning id`;
const COMPLETE = `update idem_keys set status = 'completed', outcome = $3::json,
    completed_at = now(), locked_until = null
  where scope = $1 and key = $2 and version = 1 and status = 'in_progress' returning version`;

type Op = (key: string) => Promise<void>;

runMain(async () => {
  const keys = Number(process.argv[2] ?? 3_000);
  const rounds = Number(process.argv[3] ?? 3);
  const concurrency = Number(process.argv[4] ?? 16);
  const { client, timed } = await measuredDatabase('idem_txpipe', concurrency);
  await client.unsafe(CREATE_BENCH_TABLES);
  const run = (sql: Pick<postgres.Sql, 'unsafe'>, text: string, params: unknown[]) =>
    sql.unsafe(text, params as never[], { prepare: true });
  const read = async (key: string) => {
    const [existing] = await run(client, READ, [SCOPE, key]);
    if (existing) throw new Error(`${key} exists`);
  };
  const sides: Record<string, Op> = {
    awaited: async (key) => {
      await read(key);
      await client.begin(async (tx) => {
        const [claimed] = await run(tx, CLAIM, [SCOPE, key, FP]);
        if (!claimed) throw new Error('not claimed');
        await run(tx, INSERT, ['bench', key]);
        const done = await run(tx, COMPLETE, [SCOPE, key, OUTCOME]);
        if (done.length !== 1) throw new Error('not completed');
      });
    },
    commitPipelined: async (key) => {
      await read(key);
      const { done } = await client.begin(async (tx) => {
        const [claimed] = await run(tx, CLAIM, [SCOPE, key, FP]);
        if (!claimed) throw new Error('not claimed');
        await run(tx, INSERT, ['bench', key]);
        // Not awaited: \`begin\` sends COMMIT right behind it.
        const completion = run(tx, COMPLETE, [SCOPE, key, OUTCOME]);
        completion.catch(() => {});
        return { done: completion };
      });
      if ((await done).length !== 1) throw new Error('not completed');
    },
    pipelined: async (key) => {
      await read(key);
      const reserved = await client.reserve();
      try {
        const [, [claimed]] = await Promise.all([
          reserved.unsafe('begin'),
          run(reserved, CLAIM, [SCOPE, key, FP]),
        ]);
        if (!claimed) throw new Error('not claimed');
        await run(reserved, INSERT, ['bench', key]);
        const [done] = await Promise.all([
          run(reserved, COMPLETE, [SCOPE, key, OUTCOME]),
          reserved.unsafe('commit'),
        ]);
        if (done.length !== 1) throw new Error('not completed');
      } finally {
        reserved.release();
      }
    },
  };
  const measure = (op: Op) =>
    timed(
      Array.from({ length: keys }, () => randomUUID()),
      op,
    );
  const ratios: number[] = [];
  for (let round = -1; round < rounds; round++) {
    const awaited = await measure(sides.awaited as Op);
    const commit = await measure(sides.commitPipelined as Op);
    const pipelined = await measure(sides.pipelined as Op);
    const tag = round < 0 ? 'warm' : `r${round}`;
    const vs = (other: { perSecond: number }) =>
      `${(other.perSecond / awaited.perSecond).toFixed(2)}×`;
    console.log(`${tag}  awaited ${awaited.text}`);
    console.log(`${tag}  completion+COMMIT ${commit.text}  ${vs(commit)}`);
    console.log(`${tag}  BEGIN+claim, completion+COMMIT ${pipelined.text}  ${vs(pipelined)}`);
    if (round >= 0) ratios.push(commit.perSecond / awaited.perSecond);
  }
  ratios.sort((a, b) => a - b);
  console.log(
    `completion+COMMIT / awaited, median of ${rounds} rounds: ${ratios[Math.floor(rounds / 2)]?.toFixed(2)}×`,
  );
  return 0;
});
