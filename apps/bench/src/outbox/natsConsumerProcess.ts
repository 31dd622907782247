/**
 * The NATS side's consumer, in its own process: one `consumeJetStream` on the durable
 * consumer `DURABLE` of stream `STREAM` (servers `NATS_URL`, comma-separated), handling what
 * has arrived in batches of up to `MAX_BATCH` (inbox rows + `bench_consumed` rows in one
 * transaction per batch, then acks), `CONCURRENCY` batches at a time.
 */

import { consumeJetStream, type JetStreamConsumption } from '@idem/server/nats';
import { idempotentConsumer } from '@idem/server/outbox';
import { jetstream } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { drizzle } from 'drizzle-orm/postgres-js';
import postgres from 'postgres';
import { serveParent } from '../lib/child.js';
import { NATS_URL, quiet, requiredEnv } from '../lib/config.js';
import { benchEvents, CONSUMER_NAME, recordConsumed } from './events.js';

const concurrency = Number(process.env.CONCURRENCY ?? 4);
const client = postgres(requiredEnv('DATABASE_URL'), { ...quiet, max: concurrency });
const db = drizzle(client);
const nc = await connect({
  servers: (process.env.NATS_URL ?? NATS_URL).split(','),
  maxReconnectAttempts: -1,
  reconnectTimeWait: 100,
});
const inbox = idempotentConsumer({ db, name: CONSUMER_NAME });
let consumption: JetStreamConsumption | undefined;
/** `BENCH_TRACE=1`: each second, the events handled and in how many transactions. */
const trace = { events: 0, batches: 0, small: 0 };
if (process.env.BENCH_TRACE) {
  setInterval(() => {
    if (trace.events === 0) return;
    console.error(
      `trace: nats consumer ${trace.events} events in ${Math.round(trace.batches)} transactions, ${Math.round(trace.small)} of them under 10 events`,
    );
    Object.assign(trace, { events: 0, batches: 0, small: 0 });
  }, 1_000).unref();
}
let failures = 0;
let errors = 0;
let duplicates = 0;

const parent = serveParent({
  onStop: async () => {
    await consumption?.stop();
    await nc.close();
    await client.end({ timeout: 5 });
  },
  requests: { stats: () => ({ failures, errors, duplicates }) },
});

try {
  const consumer = await jetstream(nc).consumers.get(requiredEnv('STREAM'), requiredEnv('DURABLE'));
  consumption = await consumeJetStream({
    consumer,
    inbox,
    events: benchEvents,
    maxBatch: Number(process.env.MAX_BATCH ?? 500),
    concurrency,
    // Pull again soon after the node holding the pull request dies (cluster runs).
    pullExpiresMs: 5_000,
    batchHandler: (events, tx) => recordConsumed(tx, events),
    onEvent: (event) => {
      if (event.batchSize !== undefined && event.type !== 'failed') {
        trace.events++;
        // Each event of a batch reports its size: count the batch once.
        trace.batches += 1 / event.batchSize;
        if (event.batchSize < 10) trace.small += 1 / event.batchSize;
      }
      if (event.type === 'duplicate') duplicates++;
      if (event.type === 'failed' || event.type === 'rejected') {
        failures++;
        if (failures <= 3) console.error(`nats consumer: ${event.type}`, event.error);
      }
      if (event.type === 'error') {
        errors++;
        if (errors <= 3) console.error('nats consumer: error', event.error);
      }
    },
  });
  parent.ready({ pid: process.pid });
} catch (error) {
  parent.failed(error);
}
