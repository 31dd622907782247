/**
 * One outbox relay in its own process, claiming `BATCH_SIZE` events per round. With
 * `POLL_MS` it does not LISTEN and polls instead: `MIN_POLL_MS` after a round that found
 * events, backing off to `POLL_MS` (for producers that enqueue with `notify: false`).
 * `PUBLISHER=inprocess`: the relay hands each batch to an idempotent batch consumer in this
 * process (the batch's inbox rows in one statement + its `bench_consumed` rows in one
 * INSERT, one transaction). `PUBLISHER=nats`: it publishes to JetStream on `SUBJECT` at
 * `NATS_URL` instead, the whole batch in flight at once.
 */
import { jetStreamPublisher } from '@idem/server/nats';
import {
  createRelay,
  idempotentConsumer,
  inProcessPublisher,
  type Publisher,
} from '@idem/server/outbox';
import { connect } from '@nats-io/transport-node';
import { drizzle } from 'drizzle-orm/postgres-js';
import postgres from 'postgres';
import { serveParent } from '../lib/child.js';
import { NATS_URL, quiet, requiredEnv } from '../lib/config.js';
import { BENCH_TOPIC, benchEvents, CONSUMER_NAME, recordConsumed } from './events.js';

const client = postgres(requiredEnv('DATABASE_URL'), {
  ...quiet,
  max: Number(process.env.POOL_MAX ?? 10),
});
const db = drizzle(client);
let stopPublisher: () => Promise<void> = async () => {};

let publisher: Publisher;
if (process.env.PUBLISHER === 'nats') {
  const subject = requiredEnv('SUBJECT');
  const nats = jetStreamPublisher({
    connection: () => connect({ servers: (process.env.NATS_URL ?? NATS_URL).split(',') }),
    subject: () => subject,
  });
  publisher = nats;
  stopPublisher = () => nats.close();
} else {
  const consumer = idempotentConsumer({ db, name: CONSUMER_NAME });
  publisher = inProcessPublisher(
    {
      [BENCH_TOPIC]: {
        batch: (batch) => consumer.handleBatch(batch, (fresh, tx) => recordConsumed(tx, fresh)),
      },
    },
    { events: benchEvents },
  );
}

let errors = 0;
const relay = createRelay({
  db,
  publisher,
  batchSize: Number(process.env.BATCH_SIZE ?? 100),
  // POLL_MS / MIN_POLL_MS: for producers that enqueue without NOTIFY.
  ...(process.env.POLL_MS
    ? {
        listen: false,
        pollIntervalMs: Number(process.env.POLL_MS),
        minPollIntervalMs: Number(process.env.MIN_POLL_MS ?? process.env.POLL_MS),
      }
    : {}),
  onEvent: (event) => {
    if (
      event.type === 'error' ||
      event.type === 'publish_failed' ||
      event.type === 'dead_lettered'
    ) {
      errors++;
      if (errors <= 3)
        console.error(`relay ${process.pid}: ${event.type}`, 'error' in event ? event.error : '');
    }
  },
});

const parent = serveParent({
  onStop: async () => {
    await relay.stop();
    await stopPublisher();
    await client.end({ timeout: 5 });
  },
  requests: {
    stats: async () => ({ ...(await relay.stats()), errors }),
  },
});

try {
  await relay.start();
  parent.ready({ pid: process.pid });
} catch (error) {
  parent.failed(error);
}
