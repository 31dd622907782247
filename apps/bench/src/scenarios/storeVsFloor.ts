import { randomUUID } from 'node:crypto';
import { type ClaimRequest, leaseTokenOf } from '@idem/core/store';
import { drizzleStore } from '@idem/server/postgres';
import type { Logger } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/postgres-js';
import postgres from 'postgres';
import { allIndices, onlyIndex } from '../lib/capturedParams.js';
import { quiet } from '../lib/config.js';
import { median, perRound, summarize } from '../lib/stats.js';
import { claimCompletePair } from '../lib/storePair.js';
import { formatMs, formatRate, formatRatio, verdictAtLeast } from '../lib/table.js';
import { runWorkers, type WorkersResult } from '../lib/workers.js';
import { judged, type RunContext } from './RunContext.js';

const KEY = '__bench_key__';
const TTL_MS = 86_400_000;

interface Captured {
  text: string;
  params: unknown[];
}

/**
 * Store vs floor: claim + complete pairs per second through `drizzleStore`, against the
 * very same SQL text and parameters (captured from drizzleStore through Drizzle's logger)
 * sent raw through the same postgres-js client at the same concurrency. The floor is
 * postgres-js as it runs by default (prepared statements); the unprepared variant sends
 * them the way Drizzle sends an unnamed query (`prepare: false`), to show what preparing
 * saves. drizzleStore builds each statement once and runs it as a named prepared query.
 */
export async function storeVsFloor(context: RunContext): Promise<void> {
  const { quick } = context;
  const concurrency = 8;
  const durationMs = quick ? 1_000 : 6_000;
  const rounds = quick ? 1 : 3;
  const client = postgres(context.databaseUrl, { ...quiet, max: concurrency });
  try {
    const captured: Captured[] = [];
    const logger: Logger = {
      logQuery: (text, params) => captured.push({ text, params: [...params] }),
    };
    const capturing = drizzleStore(drizzle(client, { logger }));
    const request: ClaimRequest = {
      scope: 'tenant:floor/pair',
      key: KEY,
      fingerprint: 'f'.repeat(64),
      leaseMs: 30_000,
      ttlMs: TTL_MS,
    };
    const claimed = await capturing.claim(request);
    if (claimed.status !== 'claimed') throw new Error(`capture claim answered ${claimed.status}`);
    const token = leaseTokenOf(claimed.record);
    await capturing.complete(token, { kind: 'success', value: { orderId: 1 } }, TTL_MS);
    if (captured.length !== 2) {
      throw new Error(
        `expected claim + complete to be 2 statements, drizzleStore sent ${captured.length}`,
      );
    }
    const [claimSql, completeSql] = captured as [Captured, Captured];
    // The claim names the key twice (its insert and its read of an existing row).
    const claimKeyAt = allIndices(claimSql.params, KEY, 'claim key');
    const completeKeyAt = onlyIndex(completeSql.params, KEY, 'complete key');
    // The incarnation's creation time travels as epoch milliseconds.
    const completeCreatedAt = onlyIndex(completeSql.params, token.createdAt, 'complete created_at');

    const store = drizzleStore(drizzle(client));
    const viaStore = claimCompletePair(store, request);
    const raw = (prepare: boolean) => async () => {
      const key = randomUUID();
      const claimParams = [...claimSql.params];
      for (const index of claimKeyAt) claimParams[index] = key;
      const rows = await client.unsafe(claimSql.text, claimParams as never[], { prepare });
      // A new key's row comes back as the statement's "now" alone: its creation time.
      const row = rows[0] as { now_ms: string } | undefined;
      if (!row) throw new Error('raw claim returned no row');
      const completeParams = [...completeSql.params];
      completeParams[completeKeyAt] = key;
      completeParams[completeCreatedAt] = Number(row.now_ms);
      const done = await client.unsafe(completeSql.text, completeParams as never[], { prepare });
      if (done.length !== 1) throw new Error('raw complete updated no row');
    };

    const variants = {
      store: viaStore,
      prepared: raw(true),
      unprepared: raw(false),
    } as const;
    const results: Record<keyof typeof variants, WorkersResult[]> = {
      store: [],
      prepared: [],
      unprepared: [],
    };
    // Warm every path (JIT, each connection's prepared statements) before measuring.
    for (const operation of Object.values(variants))
      await runWorkers(concurrency, quick ? 200 : 1_500, operation);
    for (let round = 0; round < rounds; round++) {
      context.log(`store vs floor: round ${round + 1}/${rounds}`);
      for (const [name, operation] of Object.entries(variants) as [
        keyof typeof variants,
        () => Promise<void>,
      ][]) {
        results[name].push(await runWorkers(concurrency, durationMs, operation));
      }
    }

    /** The median per-round ratio of `name`'s rate to `baseline`'s. */
    const ratioTo = (name: keyof typeof variants, baseline: keyof typeof variants = 'prepared') =>
      median(
        perRound(
          results[name],
          results[baseline],
          (result, base) => result.perSecond / base.perSecond,
        ),
      );
    const row = (name: keyof typeof variants, variant: string) => {
      const latency = summarize(results[name].flatMap((result) => result.latencies));
      return {
        scenario: `store vs floor (${concurrency} clients)`,
        variant,
        result: formatRate(median(results[name].map((result) => result.perSecond)), 'pairs/s'),
        p50: formatMs(latency.p50),
        p99: formatMs(latency.p99),
        ratio: formatRatio(ratioTo(name)),
      };
    };
    context.report(row('prepared', 'floor: same SQL, raw postgres-js'));
    context.report({
      ...row('unprepared', 'same SQL, postgres-js prepare: false'),
      note: 'how Drizzle sends an unnamed query',
    });
    const storeRatio = ratioTo('store');
    context.report({
      ...row('store', 'drizzleStore claim + complete'),
      target: '≥ 0.80× floor',
      verdict: judged(context, verdictAtLeast(storeRatio, 0.8)),
      note: `${formatRatio(ratioTo('store', 'unprepared'))} of the unprepared`,
    });
  } finally {
    await client.end({ timeout: 5 });
  }
}
