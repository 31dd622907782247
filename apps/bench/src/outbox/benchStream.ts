import { AckPolicy, jetstreamManager } from '@nats-io/jetstream';
import { nanos } from '@nats-io/nats-core';
import { connect } from '@nats-io/transport-node';

/** Unacknowledged messages JetStream lets the bench's consumer hold. */
const MAX_ACK_PENDING = 10_000;

export interface BenchStream {
  name: string;
  subject: string;
  /** The durable pull consumer the NATS consumer process reads. */
  durable: string;
  /** The node that leads the stream now (JetStream's `cluster.leader`), if clustered. */
  leader(): Promise<string | undefined>;
  /** Messages the stream holds. */
  messages(): Promise<number>;
  delete(): Promise<void>;
}

/**
 * A uniquely named stream (with `replicas` copies) and its durable consumer, for one
 * outbox pipeline through NATS. `servers`: every node of the cluster (or the one server).
 */
export async function createBenchStream(servers: string[], replicas: number): Promise<BenchStream> {
  const nc = await connect({ servers, maxReconnectAttempts: -1, reconnectTimeWait: 100 });
  const jsm = await jetstreamManager(nc, { timeout: 10_000 });
  const suffix = Math.random().toString(36).slice(2, 10);
  const name = `IDEM_BENCH_${suffix}`;
  const subject = `idem.bench.${suffix}`;
  const durable = 'bench';
  await jsm.streams.add({
    name,
    subjects: [subject],
    num_replicas: replicas,
    duplicate_window: nanos(120_000),
  });
  await jsm.consumers.add(name, {
    durable_name: durable,
    ack_policy: AckPolicy.Explicit,
    ack_wait: nanos(30_000),
    // JetStream stops delivering once this many messages await their ack (1,000 unless
    // set): at or below one batch of the consumer, its other transactions had nothing to
    // handle. Room for the consumer process's concurrency × batch, twice over.
    max_ack_pending: MAX_ACK_PENDING,
  });
  return {
    name,
    subject,
    durable,
    async leader() {
      const info = await jsm.streams.info(name).catch(() => undefined);
      return info?.cluster?.leader;
    },
    async messages() {
      return (await jsm.streams.info(name)).state.messages;
    },
    async delete() {
      await jsm.streams.delete(name).catch(() => false);
      await nc.close();
    },
  };
}
