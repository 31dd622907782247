import {
  createRelay,
  inProcessPublisher,
  type OutboxMessage,
  type Publisher,
} from '@idem/server/outbox';
import type { AppDatabase } from '../db/openDatabase';
import { confirmationEmails, recordDelivery, writeConfirmationEmail } from './confirmationEmails';
import { orderEvents, REDELIVER_HEADER } from './orderEvents';

export interface EventPipeline {
  /** For the start-up banner. */
  description: string;
  stop(): Promise<void>;
}

/** NATS subjects of this app's events, captured by one stream of its own. */
const SUBJECT_PREFIX = 'idem-checkout';
const STREAM = 'IDEM_CHECKOUT';

/**
 * Starts the outbox relay and the confirmation-email consumer. Without `NATS_URL` the
 * relay hands events to the consumer in this process; with it, the relay publishes to
 * NATS JetStream and a durable JetStream consumer feeds the same idempotent handler.
 */
export async function startEventPipeline(db: AppDatabase): Promise<EventPipeline> {
  const natsUrl = process.env.NATS_URL;
  if (natsUrl) return startWithNats(db, natsUrl);

  const emails = confirmationEmails(db);
  const publisher = redelivering(
    inProcessPublisher({ 'order.paid': (event) => emails.deliver(event) }, { events: orderEvents }),
  );
  const relay = createRelay({ db, publisher, pollIntervalMs: 500, backoff: { baseDelayMs: 200 } });
  await relay.start();
  return { description: 'outbox relay → in-process consumer', stop: () => relay.stop() };
}

/**
 * The "redeliver" chaos switch: an event marked by the checkout is published twice, as
 * at-least-once delivery does now and then; the consumer's inbox must absorb the copy.
 * (On NATS, JetStream drops the copy first: its message id is the event id.)
 */
function redelivering(publisher: Publisher): Publisher {
  // Without publishBatch, the relay sends every message through `publish` below.
  const { publishBatch: _sendsEachOnce, ...single } = publisher;
  return {
    ...single,
    async publish(message: OutboxMessage) {
      await publisher.publish(message);
      if (message.headers[REDELIVER_HEADER] === '1') await publisher.publish(message);
    },
  };
}

async function startWithNats(db: AppDatabase, natsUrl: string): Promise<EventPipeline> {
  const [{ connect }, { jetstreamManager, AckPolicy }, nats] = await Promise.all([
    import('@nats-io/transport-node'),
    import('@nats-io/jetstream'),
    import('@idem/server/nats'),
  ]);
  const connection = await connect({ servers: natsUrl, name: 'idem-checkout' });
  const manager = await jetstreamManager(connection);
  const subjects = [`${SUBJECT_PREFIX}.>`];
  try {
    await manager.streams.info(STREAM);
  } catch {
    await manager.streams.add({ name: STREAM, subjects });
  }
  await manager.consumers.info(STREAM, CONSUMER_NAME).catch(() =>
    manager.consumers.add(STREAM, {
      durable_name: CONSUMER_NAME,
      ack_policy: AckPolicy.Explicit,
      ack_wait: 30_000_000_000,
    }),
  );
  const consumer = await manager.jetstream().consumers.get(STREAM, CONSUMER_NAME);

  const emails = confirmationEmails(db);
  const consumption = await nats.consumeJetStream({
    consumer,
    inbox: emails.inbox,
    events: orderEvents,
    handler: (event, tx) => writeConfirmationEmail(tx, event),
    onEvent: (event) => {
      if ((event.type === 'processed' || event.type === 'duplicate') && event.eventId) {
        recordDelivery(db, event.eventId, event.type).catch(() => undefined);
      }
    },
  });

  const publisher = redelivering(
    nats.jetStreamPublisher({
      connection,
      subject: (message) => `${SUBJECT_PREFIX}.${message.topic}`,
    }),
  );
  const relay = createRelay({ db, publisher, pollIntervalMs: 500, backoff: { baseDelayMs: 200 } });
  await relay.start();
  return {
    description: `outbox relay → NATS JetStream at ${natsUrl} (stream ${STREAM})`,
    async stop() {
      await relay.stop();
      await consumption.stop();
      await connection.drain();
    },
  };
}

const CONSUMER_NAME = 'confirmation-email';
