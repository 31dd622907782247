/**
 * `tsx src/tools/pgEngineParts.ts [keys] [rounds] [concurrency]`: where the engine on
 * Postgres spends what its floor does not. Interleaved rounds of: the engine
 * (`createIdempotency` + `drizzleStore`), `drizzleStore` alone (claim + complete; a replay
 * is a claim), the store's own SQL sent raw through postgres-js (`rawcte`: what Drizzle and
 * the store's code add), and the bare floor, each printed with keys/s and this process's
 * CPU per key (less sensitive to the machine's load than the rates). `PARTS=engine,floor`
 * picks sides (`spin`: the floor after `SPIN_US`, default 16, of synchronous JavaScript per
 * call, which shows what that much work per call costs on this machine); `DUMP=1` prints
 * the store's SQL.
 */
import { randomUUID } from 'node:crypto';
import { createIdempotency } from '@idem/core';
import { leaseTokenOf } from '@idem/core/store';
import { drizzleStore } from '@idem/server/postgres';
import { drizzle } from 'drizzle-orm/postgres-js';
import { onlyIndex } from '../lib/capturedParams.js';
import { runMain } from '../lib/cleanup.js';
import { measuredDatabase } from '../lib/keysCpu.js';

const SCOPE = 'tenant:bench/parts';
const INPUT = { path: 'orders.create', input: { sku: 'tea', quantity: 1, ref: 'parts' } };
const RESULT = { orderId: 1, sku: 'tea', quantity: 1 };
const FP = 'f'.repeat(64);

type Op = (key: string) => Promise<void>;

const COLS =
  'scope, key, fingerprint, status, version, locked_until, attempts, outcome, steps, created_at, completed_at, expires_at';
const NOW = "date_trunc('milliseconds', statement_timestamp())";
/** A leaner claim: the key read first (no insert tried for an existing key), a new key's row not returned. */
const LEAN_CLAIM = `with inserted as (insert into idem_keys (${COLS}) select $1, $2, $3, 'in_progress', 1, ${NOW} + $4::float8 * interval '1 millisecond', 1, null, '{}'::jsonb, ${NOW}, null, ${NOW} + $5::float8 * interval '1 millisecond' where not exists (select 1 from idem_keys where scope = $1 and key = $2) on conflict (scope, key) do nothing returning 1) select null::text as scope, null::text as key, null::text as fingerprint, null::text as status, null::int as version, null::timestamptz as locked_until, null::int as attempts, null::json as outcome, null::jsonb as steps, null::timestamptz as created_at, null::timestamptz as completed_at, null::timestamptz as expires_at, true as inserted, (extract(epoch from ${NOW}) * 1000)::bigint as now_ms from inserted union all select ${COLS}, false, (extract(epoch from ${NOW}) * 1000)::bigint from idem_keys where scope = $1 and key = $2 and not exists (select 1 from inserted)`;

runMain(async () => {
  const keys = Number(process.argv[2] ?? 2_000);
  const rounds = Number(process.argv[3] ?? 3);
  const concurrency = Number(process.argv[4] ?? 16);
  const { client, timed } = await measuredDatabase('idem_parts', concurrency);
  const store = drizzleStore(drizzle(client));
  const captured: { text: string; params: unknown[] }[] = [];
  const capturing = drizzleStore(
    drizzle(client, {
      logger: { logQuery: (text, params) => captured.push({ text, params: [...params] }) },
    }),
  );
  const probe = await capturing.claim({
    scope: SCOPE,
    key: 'probe',
    fingerprint: FP,
    leaseMs: 30_000,
    ttlMs: 86_400_000,
  });
  if (probe.status !== 'claimed') throw new Error('probe');
  await capturing.complete(
    leaseTokenOf(probe.record),
    { kind: 'success', value: RESULT },
    86_400_000,
  );
  const [claimSql, completeSql] = captured as [(typeof captured)[0], (typeof captured)[0]];
  if (process.env.DUMP) console.log(JSON.stringify(captured, null, 1));
  const createdAtAt = onlyIndex(completeSql.params, probe.record.createdAt, 'created_at');
  const swap = (params: unknown[], from: unknown, to: unknown) =>
    params.map((param) => (param === from ? to : param));
  const engine = createIdempotency({ store });
  const handler = async () => RESULT;
  const sides: Record<string, { first: Op; replay: Op }> = {
    engine: {
      first: async (key) => {
        await engine.execute({ scope: SCOPE, key, input: INPUT }, handler);
      },
      replay: async (key) => {
        await engine.execute({ scope: SCOPE, key, input: INPUT }, handler);
      },
    },
    store: {
      first: async (key) => {
        const claim = await store.claim({
          scope: SCOPE,
          key,
          fingerprint: FP,
          leaseMs: 30_000,
          ttlMs: 86_400_000,
        });
        if (claim.status !== 'claimed') throw new Error(claim.status);
        await store.complete(
          leaseTokenOf(claim.record),
          { kind: 'success', value: RESULT },
          86_400_000,
        );
      },
      replay: async (key) => {
        const claim = await store.claim({
          scope: SCOPE,
          key,
          fingerprint: FP,
          leaseMs: 30_000,
          ttlMs: 86_400_000,
        });
        if (claim.status !== 'replay') throw new Error(claim.status);
      },
    },
    rawcte: {
      first: async (key) => {
        const [row] = await client.unsafe(
          claimSql.text,
          swap(claimSql.params, 'probe', key) as never[],
          { prepare: true },
        );
        if (!row) throw new Error('no row');
        const params = swap(completeSql.params, 'probe', key);
        params[createdAtAt] = Number(row.now_ms);
        const done = await client.unsafe(completeSql.text, params as never[], { prepare: true });
        if (done.length !== 1) throw new Error(`complete ${JSON.stringify(params)}`);
      },
      replay: async (key) => {
        await client.unsafe(claimSql.text, swap(claimSql.params, 'probe', key) as never[], {
          prepare: true,
        });
      },
    },
    rawlean: {
      first: async (key) => {
        const [row] = await client.unsafe(LEAN_CLAIM, [SCOPE, key, FP, 30_000, 86_400_000], {
          prepare: true,
        });
        if (!row?.inserted) throw new Error('lean: not inserted');
        const params = swap(completeSql.params, 'probe', key);
        params[createdAtAt] = Number(row.now_ms);
        const done = await client.unsafe(completeSql.text, params as never[], { prepare: true });
        if (done.length !== 1) throw new Error('lean: complete');
      },
      replay: async (key) => {
        const [row] = await client.unsafe(LEAN_CLAIM, [SCOPE, key, FP, 30_000, 86_400_000], {
          prepare: true,
        });
        if (row?.status !== 'completed') throw new Error('lean: replay');
      },
    },
    floor: {
      first: async (key) => {
        const [c] = await client`insert into idem_keys (scope, key, fingerprint, status,
          version, locked_until, attempts, steps, created_at, expires_at)
        values (${SCOPE}, ${key}, ${FP}, 'in_progress', 1,
          now() + interval '30 seconds', 1, '{}', now(), now() + interval '1 day')
        on conflict do nothing returning version, created_at`;
        if (!c) throw new Error('exists');
        await client`update idem_keys set status = 'completed',
          outcome = ${JSON.stringify({ kind: 'success', value: RESULT })}::json,
          completed_at = now(), locked_until = null
        where scope = ${SCOPE} and key = ${key} and version = ${c.version}
          and created_at = ${c.created_at} and status = 'in_progress' returning version`;
      },
      replay: async (key) => {
        await client`select fingerprint, status, outcome from idem_keys
        where scope = ${SCOPE} and key = ${key}`;
      },
    },
  };
  // The floor with `SPIN_US` of synchronous JavaScript before each call: what that much
  // work per call costs here, whoever does it (a yardstick for the engine's own).
  const spinUs = Number(process.env.SPIN_US ?? 16);
  const spinning =
    (op: Op): Op =>
    (key) => {
      const until = performance.now() + spinUs / 1000;
      while (performance.now() < until) {}
      return op(key);
    };
  const { floor } = sides;
  if (floor) sides.spin = { first: spinning(floor.first), replay: spinning(floor.replay) };
  const only = (process.env.PARTS ?? 'engine,store,rawcte,rawlean,floor').split(',');
  const run = async (phase: 'first' | 'replay', op: Op, ids: string[]) =>
    `${phase} ${(await timed(ids, op)).text}`;
  for (let round = -1; round < rounds; round++) {
    for (const name of only) {
      const side = sides[name];
      if (!side) continue;
      const ids = Array.from({ length: keys }, () => randomUUID());
      const first = await run('first', side.first, ids);
      const replay = await run('replay', side.replay, ids);
      console.log(`${round < 0 ? 'warm' : `r${round}`}  ${name.padEnd(7)} ${first}  ${replay}`);
    }
  }
  return 0;
});
