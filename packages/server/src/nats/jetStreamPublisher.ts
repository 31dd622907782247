import { type JetStreamClient, type JetStreamOptions, jetstream } from '@nats-io/jetstream';
import { type NatsConnection, headers as natsHeaders } from '@nats-io/nats-core';
import type { OutboxMessage, Publisher, PublishResult } from '../outbox/OutboxMessage.js';
import { isTransientNatsError } from './isTransientNatsError.js';
import { type JetStreamAcks, type JetStreamMessage, jetStreamAcks } from './jetStreamAcks.js';
import { NATS_HEADERS } from './natsHeaders.js';

export interface JetStreamPublisherOptions {
  /**
   * An open connection, or a function that opens one. With a function the publisher
   * connects on first use and again after a failed connect or a closed connection, so a
   * relay can start while NATS is down; it closes what it opened in `close()`.
   */
  connection: NatsConnection | (() => Promise<NatsConnection>);
  /**
   * The subject an event is published on; a stream must capture it.
   * @default the event's topic
   */
  subject?: (message: OutboxMessage) => string;
  /**
   * How long to wait for the stream's acknowledgement before the publish counts as failed
   * (transiently: the relay retries it, and the message id makes JetStream drop the copy
   * if the first one was stored after all). Keep it well under the relay's `leaseMs`.
   * @default 5_000
   */
  timeoutMs?: number;
  /**
   * Options for `jetstream(connection, …)` (API prefix, domain).
   * @default {}
   */
  jetStreamOptions?: JetStreamOptions;
}

interface Client {
  nc: NatsConnection;
  js: JetStreamClient;
  acks: JetStreamAcks;
}

export interface JetStreamPublisher extends Publisher {
  /** Closes the connection if the publisher opened it; a given connection is left open. */
  close(): Promise<void>;
}

/**
 * Publishes events to NATS JetStream with the event id as the message id (`Nats-Msg-Id`),
 * so JetStream drops a copy republished within the stream's `duplicate_window`. The body
 * is the payload's JSON; topic, aggregate key, creation time and the event's headers
 * travel as message headers (`Idem-Topic`, `Idem-Aggregate-Key`, `Idem-Created-At`).
 *
 * @example
 * const publisher = jetStreamPublisher({
 *   connection: () => connect({ servers: process.env.NATS_URL }),
 * });
 */
export function jetStreamPublisher(options: JetStreamPublisherOptions): JetStreamPublisher {
  const timeoutMs = options.timeoutMs ?? 5_000;
  const subjectOf = options.subject ?? ((message: OutboxMessage) => message.topic);
  const connection = connectionOf(options);
  return {
    async publish(message) {
      const { js } = await connection.client();
      await js.publish(subjectOf(message), JSON.stringify(message.payload), {
        msgID: message.id,
        headers: headersOf(message),
        timeout: timeoutMs,
      });
    },
    // A relay's batch: every message in flight at once, one reply subscription and one
    // timer for all their acknowledgements (see jetStreamAcks).
    async publishBatch(messages) {
      const { acks } = await connection.client();
      return publishAll(acks, messages, subjectOf, timeoutMs);
    },
    isTransientError: isTransientNatsError,
    close: () => connection.close(),
  };
}

/**
 * The publisher's connection: the given one, or one it opens on first use and again after a
 * failed connect or once the connection closed for good.
 */
function connectionOf({ connection, jetStreamOptions }: JetStreamPublisherOptions) {
  let opened: Promise<Client> | undefined;
  const clientOf = (nc: NatsConnection): Client => ({
    nc,
    js: jetstream(nc, jetStreamOptions),
    acks: jetStreamAcks(nc),
  });
  const client = (): Promise<Client> => {
    if (typeof connection !== 'function') {
      opened ??= Promise.resolve(clientOf(connection));
      return opened;
    }
    opened ??= connection().then(clientOf, (error: unknown) => {
      opened = undefined; // the next publish tries to connect again
      throw error;
    });
    return opened.then((current) => {
      if (!current.nc.isClosed()) return current;
      // Closed for good (reconnect attempts exhausted): open a new one.
      opened = undefined;
      return client();
    });
  };
  return {
    client,
    async close() {
      const current = await opened?.catch(() => undefined);
      opened = undefined;
      if (!current) return;
      if (typeof connection !== 'function') {
        current.acks.close(); // a given connection stays open, without our subscription
        return;
      }
      if (!current.nc.isClosed()) await current.nc.close();
    },
  };
}

/** Publishes a batch with its acknowledgements collected at once; a result per message. */
async function publishAll(
  acks: JetStreamAcks,
  messages: readonly OutboxMessage[],
  subjectOf: (message: OutboxMessage) => string,
  timeoutMs: number,
): Promise<PublishResult[]> {
  const results: PublishResult[] = [];
  const sendable: { index: number; message: JetStreamMessage }[] = [];
  messages.forEach((message, index) => {
    try {
      const headers = headersOf(message);
      headers.set(NATS_HEADERS.messageId, message.id);
      const subject = subjectOf(message);
      sendable.push({
        index,
        message: { subject, payload: JSON.stringify(message.payload), headers },
      });
    } catch (error) {
      // `subject` threw for this message: it fails alone.
      results[index] = { ok: false, error };
    }
  });
  const acknowledged = await acks.publishAll(
    sendable.map(({ message }) => message),
    timeoutMs,
  );
  sendable.forEach(({ index }, position) => {
    const result = acknowledged[position];
    if (result) results[index] = result;
  });
  return results;
}

/** The event's own headers, and the ones `consumeJetStream` reads the event back from. */
function headersOf(message: OutboxMessage) {
  const headers = natsHeaders();
  for (const [name, value] of Object.entries(message.headers)) headers.set(name, value);
  headers.set(NATS_HEADERS.topic, message.topic);
  if (message.aggregateKey !== null) headers.set(NATS_HEADERS.aggregateKey, message.aggregateKey);
  headers.set(NATS_HEADERS.createdAt, message.createdAt.toISOString());
  return headers;
}
