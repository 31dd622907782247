import type { ClaimRequest, IdempotencyStore } from '@idem/core/store';
import { redisStore as createRedisStore } from '@idem/redis';
import { startRedisServer } from '@idem/redis/testing';
import { drizzleStore } from '@idem/server/postgres';
import { drizzle } from 'drizzle-orm/postgres-js';
import postgres from 'postgres';
import { createClient } from 'redis';
import { quiet } from '../lib/config.js';
import { median, perRound, summarize } from '../lib/stats.js';
import { claimCompletePair } from '../lib/storePair.js';
import { formatMs, formatRate, formatRatio } from '../lib/table.js';
import { runWorkers, type WorkersResult } from '../lib/workers.js';
import type { RunContext } from './RunContext.js';

const TTL_MS = 86_400_000;

/**
 * Redis store vs drizzleStore: claim + complete pairs per second of a new key each, through
 * `redisStore` on a throwaway `redis-server` (started here on a free port, no persistence)
 * and through `drizzleStore` on the run's Postgres, at the same concurrency, alternating
 * round by round so both see the same machine load. Each pair is two round trips on
 * either store; Redis keeps the records in memory and fsyncs nothing, Postgres commits
 * each statement durably: the ratio is the price of that durability, not of idem.
 */
export async function redisStore(context: RunContext): Promise<void> {
  const { quick } = context;
  const concurrency = 8;
  const durationMs = quick ? 1_000 : 6_000;
  const rounds = quick ? 1 : 3;
  const server = await startRedisServer();
  const redis = await createClient({ url: server.url }).connect();
  const sql = postgres(context.databaseUrl, { ...quiet, max: concurrency });
  try {
    const stores: Record<'redis' | 'drizzle', IdempotencyStore> = {
      redis: createRedisStore(redis),
      drizzle: drizzleStore(drizzle(sql)),
    };
    const request: Omit<ClaimRequest, 'key'> = {
      scope: 'tenant:bench/pair',
      fingerprint: 'f'.repeat(64),
      leaseMs: 30_000,
      ttlMs: TTL_MS,
    };
    const pair = (store: IdempotencyStore) => claimCompletePair(store, request);
    const results: Record<keyof typeof stores, WorkersResult[]> = { redis: [], drizzle: [] };
    // Warm both paths (JIT, prepared statements, cached scripts) before measuring.
    for (const store of Object.values(stores)) {
      await runWorkers(concurrency, quick ? 200 : 1_500, pair(store));
    }
    for (let round = 0; round < rounds; round++) {
      context.log(`redis store vs drizzleStore: round ${round + 1}/${rounds}`);
      for (const name of ['drizzle', 'redis'] as const) {
        results[name].push(await runWorkers(concurrency, durationMs, pair(stores[name])));
      }
    }

    const row = (name: keyof typeof stores, variant: string) => {
      const latency = summarize(results[name].flatMap((result) => result.latencies));
      return {
        scenario: `redis store vs drizzleStore (${concurrency} clients)`,
        variant,
        result: formatRate(median(results[name].map((result) => result.perSecond)), 'pairs/s'),
        p50: formatMs(latency.p50),
        p99: formatMs(latency.p99),
        ratio: formatRatio(
          median(
            perRound(
              results[name],
              results.drizzle,
              (result, base) => result.perSecond / base.perSecond,
            ),
          ),
        ),
      };
    };
    context.report(row('drizzle', 'drizzleStore claim + complete (Postgres)'));
    context.report({
      ...row('redis', 'redisStore claim + complete (one redis-server)'),
      note: 'in memory, no fsync: see its README on durability',
    });
  } finally {
    await redis.close();
    await sql.end({ timeout: 5 });
    await server.stop();
  }
}
