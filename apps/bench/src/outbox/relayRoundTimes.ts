/**
 * `npx tsx --conditions=@idem/source src/outbox/relayRoundTimes.ts [events] [batch]`: where
 * one relay's round spends its time, on a scratch database with the events enqueued
 * beforehand (no producer competing): the claim statement, the in-process batch consumer's
 * transaction (inbox rows + `bench_consumed` rows), and the settle statement, per event.
 * `FILL=100` first sets the outbox table's fillfactor (migration 0003 sets 40: room on each
 * page, so that the claim's UPDATE is a HOT update that writes no index entries); the line
 * ends with how many of the outbox's updates were HOT. `RETAIN=1` keeps published rows marked sent
 * (`retainSentMs`) instead of deleting them, the relay's behaviour before deletion.
 */

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
  const client = postgres(scratch.url, { ...quiet, max: 4 });
  try {
    const db = drizzle(client);
    await migrate(db);
    await client.unsafe(CREATE_CONSUMED_TABLE);
    if (process.env.FILL) {
      await client.unsafe(`alter table idem_outbox set (fillfactor = ${Number(process.env.FILL)})`);
    }
    for (let from = 0; from < events; from += 500) {
      const list = Array.from({ length: Math.min(500, events - from) }, (_, index) => ({
        topic: BENCH_TOPIC,
        payload: { n: from + index },
      }));
      await db.transaction((tx) => benchEvents.enqueue(tx, list));
    }
    const consumer = idempotentConsumer({ db, name: 'bench' });
    let consumerMs = 0;
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
              const results = await consumer.handleBatch(batch, (fresh, tx) =>
                recordConsumed(tx, fresh),
              );
              consumerMs += performance.now() - startedAt;
              return results;
            },
          },
        },
        { events: benchEvents },
      ),
    });
    const startedAt = performance.now();
    let published = 0;
    for (;;) {
      const round = await relay.runOnce();
      published += round.published;
      if (round.claimed === 0) break;
    }
    const totalMs = performance.now() - startedAt;
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
    return 0;
  } finally {
    await client.end({ timeout: 5 });
    await scratch.drop();
  }
});
