import { randomUUID } from 'node:crypto';
import { leaseTokenOf } from '@idem/core/store';
import { drizzleStore, sweepExpired } from '@idem/server/postgres';
import { drizzle } from 'drizzle-orm/postgres-js';
import postgres from 'postgres';
import { quiet } from '../lib/config.js';
import { nowMs, type Summary, summarize } from '../lib/stats.js';
import { formatCount, formatMs, formatRate, formatRatio, verdictAtMost } from '../lib/table.js';
import { runWorkers } from '../lib/workers.js';
import { judged, type RunContext } from './RunContext.js';

const SCOPE = 'tenant:growth/orders.create';
const TTL_MS = 86_400_000;

/**
 * Growth: claim latency with few vs many keys in `idem_keys` (should be flat: a B-tree
 * lookup), and claim latency while a sweeper deletes a million expired rows (≤ 2× idle).
 * Rows are bulk-loaded with one INSERT … SELECT generate_series each, then VACUUM ANALYZEd
 * so that every measurement starts from the same table state a settled database has.
 */
export async function growth(context: RunContext): Promise<void> {
  const { quick, sql } = context;
  const small = quick ? 1_000 : 10_000;
  const large = quick ? 10_000 : 1_000_000;
  const expired = quick ? 10_000 : 1_000_000;
  const concurrency = 4;
  const measureMs = quick ? 1_000 : 8_000;

  const client = postgres(context.databaseUrl, { ...quiet, max: concurrency + 1 });
  try {
    const store = drizzleStore(drizzle(client));
    const claimOnce = async (latencies: number[]) => {
      const started = nowMs();
      const claim = await store.claim({
        scope: SCOPE,
        key: randomUUID(),
        fingerprint: 'f'.repeat(64),
        leaseMs: 30_000,
        ttlMs: TTL_MS,
      });
      latencies.push(nowMs() - started);
      if (claim.status !== 'claimed') throw new Error(`claim answered ${claim.status}`);
      // Complete it too (not timed), so the table holds what a real workload leaves.
      await store.complete(
        leaseTokenOf(claim.record),
        { kind: 'success', value: { orderId: 1 } },
        TTL_MS,
      );
    };
    const measure = async (
      durationMs: number,
      shouldStop?: () => boolean,
    ): Promise<Summary & { perSecond: number }> => {
      const latencies: number[] = [];
      const run = await runWorkers(concurrency, durationMs, () => claimOnce(latencies), shouldStop);
      return { ...summarize(latencies), perSecond: run.perSecond };
    };
    const load = async (from: number, to: number, live: boolean) => {
      const started = nowMs();
      await sql.unsafe(
        `insert into idem_keys (scope, key, fingerprint, status, version, locked_until, attempts,
           outcome, steps, created_at, completed_at, expires_at)
         select $1, $2 || g, md5(g::text), 'completed', 1, null, 1,
           '{"kind":"success","value":{"orderId":1}}'::jsonb, '{}'::jsonb,
           now() - interval '2 days', now() - interval '2 days',
           ${live ? "now() + interval '1 day'" : "now() - interval '1 day'"}
         from generate_series($3::int, $4::int) as g`,
        [SCOPE, live ? 'live-' : 'expired-', from, to - 1],
      );
      await sql.unsafe('vacuum analyze idem_keys');
      context.log(
        `growth: loaded ${formatCount(to - from)} ${live ? 'live' : 'expired'} rows in ${formatMs(nowMs() - started)}`,
      );
    };

    await load(0, small, true);
    await measure(quick ? 200 : 1_500); // warm-up
    const few = await measure(measureMs);
    await load(small, large, true);
    await measure(quick ? 200 : 1_500);
    const many = await measure(measureMs);

    await load(0, expired, false);
    const idle = await measure(measureMs);
    let swept = 0;
    let sweeping = true;
    const sweepStarted = nowMs();
    // idem's own sweeper, as an app server runs it (its default batches) until none is left.
    const sweeper = sweepExpired({ db: drizzle(client) })
      .then((deleted) => {
        swept = deleted;
      })
      .finally(() => {
        sweeping = false;
      });
    // Claims run for as long as the sweep does (bounded, in case it never ends).
    const during = await measure(quick ? 60_000 : 600_000, () => !sweeping);
    await sweeper;
    const sweepMs = nowMs() - sweepStarted;
    if (swept < expired)
      context.fail(`growth: the sweeper deleted ${swept} of ${expired} expired rows`);

    const scenario = 'growth (4 clients, claim)';
    context.report({
      scenario,
      variant: `${formatCount(small)} keys`,
      result: formatRate(few.perSecond, 'claims/s'),
      p50: formatMs(few.p50),
      p99: formatMs(few.p99),
      ratio: formatRatio(1),
    });
    const growthRatio = many.p50 / few.p50;
    context.report({
      scenario,
      variant: `${formatCount(large)} keys`,
      result: formatRate(many.perSecond, 'claims/s'),
      p50: formatMs(many.p50),
      p99: formatMs(many.p99),
      ratio: formatRatio(growthRatio),
      target: 'flat: p50 ≤ 1.25×',
      verdict: judged(context, verdictAtMost(growthRatio, 1.25)),
      note: `p99 ${formatRatio(many.p99 / few.p99)}`,
    });
    context.report({
      scenario,
      variant: `+${formatCount(expired)} expired, idle`,
      result: formatRate(idle.perSecond, 'claims/s'),
      p50: formatMs(idle.p50),
      p99: formatMs(idle.p99),
      ratio: formatRatio(1),
    });
    const sweepRatio = during.p99 / idle.p99;
    context.report({
      scenario,
      variant: 'while sweeping them',
      result: formatRate(during.perSecond, 'claims/s'),
      p50: formatMs(during.p50),
      p99: formatMs(during.p99),
      ratio: formatRatio(sweepRatio),
      target: 'p99 ≤ 2× idle',
      verdict: judged(context, verdictAtMost(sweepRatio, 2)),
      note: `swept ${formatCount(swept)} in ${formatMs(sweepMs)} (${formatRate((swept / sweepMs) * 1000, 'rows/s')}, sweepExpired, default batches)`,
    });
  } finally {
    await client.end({ timeout: 5 });
  }
}
