/**
 * `npx tsx --conditions=@idem/source src/outbox/enqueueNotify.ts`: what `enqueue`'s
 * NOTIFY costs producers. On a scratch database, `PRODUCERS` connections (default 16)
 * enqueue `TOTAL` events (default 4,000), `PER_TX` per transaction (default 1), with
 * `notify: true` and `notify: false` in four interleaved pairs, while one connection
 * LISTENs (as a relay would). Postgres takes a server-wide lock from a notifying
 * transaction's commit until it ends, so notifying commits happen one at a time, each with
 * its own WAL flush; without NOTIFY concurrent commits are flushed together.
 */
import { defineEvents } from '@idem/server/outbox';
import { migrate } from '@idem/server/postgres';
import { drizzle } from 'drizzle-orm/postgres-js';
import postgres from 'postgres';
import { z } from 'zod';
import { runMain } from '../lib/cleanup.js';
import { quiet } from '../lib/config.js';
import { createScratchDatabase } from '../lib/scratchDatabase.js';

const schemas = { 'bench.notify': z.object({ n: z.number().int() }) };

runMain(async () => {
  const producers = Number(process.env.PRODUCERS ?? 16);
  const perTransaction = Number(process.env.PER_TX ?? 1);
  const total = Number(process.env.TOTAL ?? 4_000);
  const scratch = await createScratchDatabase();
  const client = postgres(scratch.url, { ...quiet, max: producers });
  const listener = postgres(scratch.url, { ...quiet, max: 1 });
  try {
    const db = drizzle(client);
    await migrate(db);
    const variants = [
      ['NOTIFY', defineEvents(schemas)],
      ['notify: false', defineEvents(schemas, { notify: false })],
    ] as const;
    let heard = 0;
    await listener.listen('idem_outbox', () => heard++);
    for (let pair = 0; pair < 4; pair++) {
      const rates: string[] = [];
      for (const [name, events] of variants) {
        await client`truncate idem_outbox`;
        let next = 0;
        const startedAt = performance.now();
        await Promise.all(
          Array.from({ length: producers }, async () => {
            while (next < total) {
              next += perTransaction;
              const batch = Array.from({ length: perTransaction }, (_, n) => ({
                topic: 'bench.notify' as const,
                payload: { n },
              }));
              await db.transaction((tx) => events.enqueue(tx, batch));
            }
          }),
        );
        const perSecond = (total / (performance.now() - startedAt)) * 1000;
        rates.push(`${name} ${perSecond.toFixed(0)} events/s`);
      }
      console.log(`${producers} producers × ${perTransaction}/tx: ${rates.join(', ')}`);
    }
    console.log(`notifications delivered to the listener: ${heard}`);
    return 0;
  } finally {
    await client.end({ timeout: 5 });
    await listener.end({ timeout: 5 });
    await scratch.drop();
  }
});
