import { randomUUID } from 'node:crypto';
import {
  AckPolicy,
  type ConsumerConfig,
  type JetStreamClient,
  type JetStreamManager,
  jetstream,
  jetstreamManager,
} from '@nats-io/jetstream';
import { type NatsConnection, nanos } from '@nats-io/nats-core';
import { connect } from '@nats-io/transport-node';
import { afterAll, afterEach, beforeAll } from 'vitest';

export const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const natsAddress = new URL(NATS_URL.replace(/^nats:/, 'http:'));
export const NATS_HOST = natsAddress.hostname;
export const NATS_PORT = Number(natsAddress.port || 4222);

export interface TestStream {
  name: string;
  /** Subjects of this stream: `${prefix}.<topic>`. */
  prefix: string;
  subjectOf: (message: { topic: string }) => string;
  /** Adds a durable pull consumer with explicit acks. */
  addConsumer(config?: Partial<ConsumerConfig>): Promise<string>;
}

/**
 * A NATS connection for the file, and uniquely named streams that are deleted after each
 * test: the machine's nats-server is shared, so nothing is left behind on it.
 */
export function useJetStream(): () => {
  nc: NatsConnection;
  js: JetStreamClient;
  jsm: JetStreamManager;
  createStream(): Promise<TestStream>;
} {
  let nc: NatsConnection | undefined;
  let jsm: JetStreamManager | undefined;
  const created: string[] = [];
  beforeAll(async () => {
    nc = await connect({ servers: NATS_URL });
    jsm = await jetstreamManager(nc);
  });
  afterEach(async () => {
    for (const name of created.splice(0)) await jsm?.streams.delete(name).catch(() => false);
  });
  afterAll(async () => {
    await nc?.close();
  });
  return () => {
    if (!nc || !jsm) throw new Error('NATS is not connected (used outside a test?)');
    const manager = jsm;
    return {
      nc,
      jsm: manager,
      js: jetstream(nc),
      async createStream() {
        const suffix = randomUUID().replaceAll('-', '').slice(0, 12);
        const name = `IDEM_TEST_${suffix}`;
        const prefix = `idemtest.${suffix}`;
        await manager.streams.add({
          name,
          subjects: [`${prefix}.>`],
          duplicate_window: nanos(120_000),
        });
        created.push(name);
        return {
          name,
          prefix,
          subjectOf: (message) => `${prefix}.${message.topic}`,
          async addConsumer(config = {}) {
            const durable = `c_${randomUUID().replaceAll('-', '').slice(0, 8)}`;
            await manager.consumers.add(name, {
              durable_name: durable,
              ack_policy: AckPolicy.Explicit,
              ack_wait: nanos(5_000),
              ...config,
            });
            return durable;
          },
        };
      },
    };
  };
}
