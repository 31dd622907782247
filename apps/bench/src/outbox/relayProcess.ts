/**
 * One outbox relay in its own process. `PUBLISHER=inprocess`: the relay hands each event to
 * an idempotent consumer in this process (inbox row + `bench_consumed` row in one
 * transaction). `PUBLISHER=nats`: it publishes to JetStream on `SUBJECT` instead.
 */
import { createRelay, idempotentConsumer, inProcessPublisher, type Publisher } from '@idem/server';
import { jetStreamPublisher } from '@idem/server/nats';
import { connect } from '@nats-io/transport-node';
import { drizzle } from 'drizzle-orm/postgres-js';
import postgres from 'postgres';
import { serveParent } from '../lib/child.js';
import { NATS_URL, quiet } from '../lib/config.js';
import { BENCH_TOPIC, benchConsumed, benchEvents, CONSUMER_NAME } from './events.js';

const client = postgres(process.env.DATABASE_URL!, {
  ...quiet,
  max: Number(process.env.POOL_MAX ?? 10),
});
const db = drizzle(client);
let stopPublisher: () => Promise<void> = async () => {};

let publisher: Publisher;
if (process.env.PUBLISHER === 'nats') {
  const subject = process.env.SUBJECT!;
  const nats = jetStreamPublisher({
    connection: () => connect({ servers: NATS_URL }),
    subject: () => subject,
  });
  publisher = nats;
  stopPublisher = () => nats.close();
} else {
  const consumer = idempotentConsumer({ db, name: CONSUMER_NAME });
  publisher = inProcessPublisher(
    {
      [BENCH_TOPIC]: (event) =>
        consumer.handle(event, async (tx) => {
          await tx.insert(benchConsumed).values({ eventId: event.id, n: event.payload.n });
        }),
    },
    { events: benchEvents },
  );
}

let errors = 0;
const relay = createRelay({
  db,
  publisher,
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
