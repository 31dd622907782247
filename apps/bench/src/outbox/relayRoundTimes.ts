/**
 * `npx tsx --conditions=@idem/source src/outbox/relayRoundTimes.ts [events] [batch]`: where
 * one relay's round spends its time, on a scratch database with the events enqueued
 * beforehand (no producer competing): the claim statement, the in-process batch consumer's
 * transaction (inbox rows + `bench_consumed` rows), and the settle statement, per event.
 * `FILL=100` first sets the outbox table's fillfactor (migration 0003 sets 40: room on each
 * page, so that the claim's UPDATE is a HOT update that writes no index entries); the line
 * ends with how many of the outbox's updates were HOT. `RETAIN=1` keeps published rows marked sent
 * (`retainSentMs`) instead of deleting them, the relay's behaviour before deletion.
 *
 * Everything runs on ONE connection, so that with Postgres on this machine the line also
 * gives that backend's CPU time per event (from /proc): for enqueue (50 events per
 * transaction), the consumer's transaction, and the claim and settle statements. Wall
 * times swing with the machine's load; the backend's CPU time much less.
 */

import { readFileSync } from 'node:fs';
import { createRelay, idempotentConsumer, inProcessPublisher } from '@idem/server/outbox';
import { migrate } from '@idem/server/postgres';
import { drizzle } from 'drizzle-orm/postgres-js';
import postgres from 'postgres';
import { runMain } from '../lib/cleanup.js';
import { quiet } from '../lib/config.js';
import { createScratchDatabase } from '../lib/scratchDatabase.js';
import { BENCH_TOPIC, benchEvents, CREATE_CONSUMED_TABLE, recordConsumed } from './events.js';

runMain(async () => {
  const events = Number(process.argv[2] ?? 20_000);
  const batchSize = Number(process.argv[3] ?? 500);
  const scratch = await createScratchDatabase();
  const client = postgres(scratch.url, { ...quiet, max: 1 });
  try {
    const db = drizzle(client);
    await migrate(db);
    await client.unsafe(CREATE_CONSUMED_TABLE);
    if (process.env.FILL) {
      await client.unsafe(`alter table idem_outbox set (fillfactor = ${Number(process.env.FILL)})`);
    }
    const [backend] = await client<{ pid: number }[]>`select pg_backend_pid() as pid`;
    const cpuMs = backendCpuMs(backend?.pid ?? 0);
    const enqueueCpuMs = cpuMs();
    for (let from = 0; from < events; from += 50) {
      const list = Array.from({ length: Math.min(50, events - from) }, (_, index) => ({
        topic: BENCH_TOPIC,
        payload: { n: from + index },
      }));
      await db.transaction((tx) => benchEvents.enqueue(tx, list));
    }
    const enqueueCpu = cpuMs() - enqueueCpuMs;
    const consumer = idempotentConsumer({ db, name: 'bench' });
    let consumerMs = 0;
    let consumerCpu = 0;
    // The relay's statements are timed from outside: a round minus its publish.
    const relay = createRelay({
      db,
      batchSize,
      listen: false,
      ...(process.env.RETAIN ? { retainSentMs: 86_400_000 } : {}),
      publisher: inProcessPublisher(
        {
          [BENCH_TOPIC]: {
            batch: async (batch) => {
              const startedAt = performance.now();
              const cpuAt = cpuMs();
              const results = await consumer.handleBatch(batch, (fresh, tx) =>
                recordConsumed(tx, fresh),
              );
              consumerMs += performance.now() - startedAt;
              consumerCpu += cpuMs() - cpuAt;
              return results;
            },
          },
        },
        { events: benchEvents },
      ),
    });
    const startedAt = performance.now();
    const roundsCpuAt = cpuMs();
    let published = 0;
    for (;;) {
      const round = await relay.runOnce();
      published += round.published;
      if (round.claimed === 0) break;
    }
    const totalMs = performance.now() - startedAt;
    const roundsCpu = cpuMs() - roundsCpuAt;
    // The statistics collector reports with a delay; a snapshot after the run is enough.
    await client`select pg_stat_force_next_flush()`;
    const [updates] = await client<{ updates: number; hot: number }[]>`
      select n_tup_upd::int as updates, n_tup_hot_upd::int as hot
      from pg_stat_user_tables where relname = 'idem_outbox'`;
    const perEventUs = (ms: number) => ((ms * 1000) / published).toFixed(0);
    console.log(
      `${published} events, batches of ${batchSize}: ${((published / totalMs) * 1000).toFixed(0)} events/s with one relay; ` +
        `per event ${perEventUs(totalMs)} µs = consumer transaction ${perEventUs(consumerMs)} µs + ` +
        `claim and settle statements ${perEventUs(totalMs - consumerMs)} µs; ` +
        `${updates?.hot ?? 0} of ${updates?.updates ?? 0} outbox updates were HOT`,
    );
    if (backend && roundsCpu > 0) {
      console.log(
        `Postgres backend CPU per event: enqueue ${perEventUs(enqueueCpu)} µs, consumer transaction ${perEventUs(consumerCpu)} µs, ` +
          `claim and settle ${perEventUs(roundsCpu - consumerCpu)} µs`,
      );
    }
    return 0;
  } finally {
    await client.end({ timeout: 5 });
    await scratch.drop();
  }
});

/** The CPU time (user + system, ms) a local Postgres backend has used; 0 if not readable. */
function backendCpuMs(pid: number): () => number {
  const ticksPerMs = 100 / 1000; // USER_HZ
  return () => {
    try {
      const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
      return (Number(fields[11]) + Number(fields[12])) / ticksPerMs;
    } catch {
      return 0;
    }
  };
}
