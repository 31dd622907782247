/**
 * The NATS side's consumer, in its own process: `CONSUMERS` concurrent `consumeJetStream`
 * loops on the durable consumer `DURABLE` of stream `STREAM`, each handling one message at a
 * time through the idempotent consumer (inbox row + `bench_consumed` row, then ack).
 */
import { idempotentConsumer } from '@idem/server';
import { consumeJetStream, type JetStreamConsumption } from '@idem/server/nats';
import { jetstream } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { drizzle } from 'drizzle-orm/postgres-js';
import postgres from 'postgres';
import { serveParent } from '../lib/child.js';
import { NATS_URL, quiet } from '../lib/config.js';
import { benchConsumed, benchEvents, CONSUMER_NAME } from './events.js';

const loops = Number(process.env.CONSUMERS ?? 8);
const client = postgres(process.env.DATABASE_URL!, { ...quiet, max: loops });
const db = drizzle(client);
const nc = await connect({ servers: NATS_URL });
const inbox = idempotentConsumer({ db, name: CONSUMER_NAME });
const consumptions: JetStreamConsumption[] = [];
let failures = 0;

const parent = serveParent({
  onStop: async () => {
    await Promise.all(consumptions.map((consumption) => consumption.stop()));
    await nc.close();
    await client.end({ timeout: 5 });
  },
  requests: { stats: () => ({ failures }) },
});

try {
  const consumer = await jetstream(nc).consumers.get(process.env.STREAM!, process.env.DURABLE!);
  for (let index = 0; index < loops; index++) {
    consumptions.push(
      await consumeJetStream({
        consumer,
        inbox,
        events: benchEvents,
        handler: async (event, tx) => {
          await tx.insert(benchConsumed).values({ eventId: event.id, n: event.payload.n });
        },
        onEvent: (event) => {
          if (event.type === 'failed' || event.type === 'rejected' || event.type === 'error') {
            failures++;
            if (failures <= 3) console.error(`nats consumer: ${event.type}`, event.error);
          }
        },
      }),
    );
  }
  parent.ready({ pid: process.pid });
} catch (error) {
  parent.failed(error);
}
