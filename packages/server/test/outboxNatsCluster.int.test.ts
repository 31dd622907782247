import { randomUUID } from 'node:crypto';
import { AckPolicy, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { type NatsConnection, nanos } from '@nats-io/nats-core';
import { connect } from '@nats-io/transport-node';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { JetStreamConsumerEvent } from '../src/nats/ConsumeJetStreamOptions.js';
import { consumeJetStream } from '../src/nats/consumeJetStream.js';
import { jetStreamPublisher } from '../src/nats/jetStreamPublisher.js';
import { idempotentConsumer } from '../src/outbox/inbox/idempotentConsumer.js';
import { createRelay } from '../src/outbox/relay/createRelay.js';
import type { RelayEvent } from '../src/outbox/relay/RelayEvent.js';
import { type NatsCluster, startNatsCluster } from '../src/testing/startNatsCluster.js';
import { useDatabase } from './harness.js';
import { effectCounts, events, resetOutbox, waitFor } from './outbox/fixtures.js';

const EVENTS = 2_000;
const PER_TRANSACTION = 20;
/** Clients fail over between the nodes, and keep trying while one is down. */
const clientOptions = { maxReconnectAttempts: -1, reconnectTimeWait: 100, timeout: 2_000 };

describe('a 3-node NATS JetStream cluster, its stream leader killed mid-run', () => {
  const database = useDatabase('Postgres');
  let cluster: NatsCluster | undefined;
  beforeAll(async () => {
    cluster = await startNatsCluster({ size: 3, readyTimeoutMs: 60_000 });
  }, 90_000);
  afterAll(async () => {
    await cluster?.stop();
  });

  it('loses no event and processes none twice; the relay counts its own retries', async () => {
    const nodes = cluster as NatsCluster;
    const { db } = database();
    await resetOutbox(db);
    const opened: { close(): Promise<unknown> }[] = [];
    const open = async (servers: string[]): Promise<NatsConnection> => {
      const nc = await connect({ servers, noRandomize: true, ...clientOptions });
      opened.push(nc);
      return nc;
    };
    const admin = await open(nodes.servers);
    const jsm = await jetstreamManager(admin, { timeout: 10_000 });
    const suffix = randomUUID().replaceAll('-', '').slice(0, 12);
    const stream = `IDEM_CLUSTER_${suffix}`;
    const subject = `idemcluster.${suffix}`;
    await jsm.streams.add({
      name: stream,
      subjects: [subject],
      num_replicas: 3,
      duplicate_window: nanos(120_000),
    });
    await jsm.consumers.add(stream, {
      durable_name: 'billing',
      ack_policy: AckPolicy.Explicit,
      ack_wait: nanos(10_000),
    });
    /** The stream leader's name, asked again until the cluster answers with one. */
    const leaderNow = async () => {
      let leader: string | undefined;
      await waitFor(
        async () => {
          leader = await jsm.streams
            .info(stream)
            .then((info) => info.cluster?.leader)
            .catch(() => undefined);
          return Boolean(leader);
        },
        { timeoutMs: 60_000, intervalMs: 100, what: 'the stream to have a leader' },
      );
      return leader as string;
    };
    const firstLeader = nodes.node(await leaderNow());
    // The relay talks to the leader's node first, so the kill cuts its connection too.
    const relayServers = [
      firstLeader.url,
      ...nodes.servers.filter((url) => url !== firstLeader.url),
    ];

    const log: RelayEvent[] = [];
    const publisher = jetStreamPublisher({
      connection: await open(relayServers),
      subject: () => subject,
      timeoutMs: 2_000,
    });
    const relay = createRelay({
      db,
      publisher,
      batchSize: 100,
      pollIntervalMs: 50,
      backoff: { baseDelayMs: 50, maxDelayMs: 500 },
      onEvent: (event) => log.push(event),
    });
    const reported: JetStreamConsumerEvent[] = [];
    const inbox = idempotentConsumer({ db, name: 'billing' });
    const consumption = await consumeJetStream({
      consumer: await jetstream(await open(nodes.servers)).consumers.get(stream, 'billing'),
      inbox,
      events,
      maxBatch: 100,
      concurrency: 2,
      pullExpiresMs: 4_000,
      nakBackoff: { baseDelayMs: 50, maxDelayMs: 500 },
      batchHandler: async (batch, tx) => {
        await tx.execute(
          sql`insert into outbox_test_effects (event_id) values ${sql.join(
            batch.map((event) => sql`(${event.id})`),
            sql`, `,
          )}`,
        );
      },
      onEvent: (event) => reported.push(event),
    });

    try {
      await relay.start();
      const ids: string[] = [];
      let killed: Promise<void> | undefined;
      let electedWhileDown: string | undefined;
      for (let from = 0; from < EVENTS; from += PER_TRANSACTION) {
        ids.push(
          ...(await db.transaction((tx) =>
            events.enqueue(
              tx,
              Array.from({ length: PER_TRANSACTION }, (_, index) => ({
                topic: 'test.numbered' as const,
                payload: { n: from + index },
              })),
            ),
          )),
        );
        if (from === EVENTS / 4) {
          // Mid-run: some events consumed, more on their way, the relay publishing.
          await waitFor(async () => (await effectCounts(db)).size >= EVENTS / 8, {
            timeoutMs: 60_000,
            what: 'the first events to come through the cluster',
          });
          killed = firstLeader.kill();
          await killed;
          // The loop goes on enqueueing at once: the relay publishes them while the stream
          // has no leader (an election takes seconds), so its own retries show.
        }
        if (from === EVENTS / 2) {
          await waitFor(async () => (await relay.stats()).failed > 0, {
            timeoutMs: 60_000,
            what: 'the relay to see publishes fail while the stream elects a leader',
          });
          // The two survivors elect a leader of their own while the first is down (once it
          // is back, leadership may well return to it, so this is checked now; until the
          // survivors notice, stream info may still name the dead node).
          await waitFor(
            async () => {
              electedWhileDown = await leaderNow();
              return electedWhileDown !== firstLeader.name;
            },
            { timeoutMs: 60_000, intervalMs: 100, what: 'the survivors to elect a leader' },
          );
          await firstLeader.start();
        }
        await new Promise((resolve) => setImmediate(resolve));
      }
      expect(killed).toBeDefined();
      expect(electedWhileDown).toBeDefined();
      expect(electedWhileDown).not.toBe(firstLeader.name);

      await waitFor(async () => (await effectCounts(db)).size === EVENTS, {
        timeoutMs: 120_000,
        intervalMs: 100,
        what: `all ${EVENTS} events to be consumed`,
      });
      await waitFor(async () => (await relay.stats()).backlog === 0, {
        timeoutMs: 30_000,
        what: 'the relay to settle everything',
      });

      // 0 lost, 0 processed twice.
      const counts = await effectCounts(db);
      expect(new Set(counts.keys())).toEqual(new Set(ids));
      expect([...counts.values()].filter((count) => count !== 1)).toEqual([]);
      // JetStream stored each event once: the relay's retries were deduplicated by id.
      await waitFor(
        async () =>
          (await jsm.streams.info(stream).catch(() => undefined))?.state.messages === EVENTS,
        { timeoutMs: 30_000, what: `the stream to hold exactly ${EVENTS} messages` },
      );
      // The relay's own retries, in its stats and its events; nothing dead-lettered.
      const stats = await relay.stats();
      expect(stats.failed).toBeGreaterThan(0);
      expect(stats).toMatchObject({ backlog: 0, dead: 0, deadLettered: 0, published: EVENTS });
      expect(log.some((event) => event.type === 'publisher_unavailable')).toBe(true);
      expect(reported.filter((event) => event.type === 'processed')).toHaveLength(EVENTS);
      expect(reported.filter((event) => event.type === 'rejected')).toEqual([]);
    } finally {
      await relay.stop();
      await consumption.stop();
      await publisher.close();
      for (const nc of opened.reverse()) await nc.close().catch(() => undefined);
    }
  }, 300_000);
});
