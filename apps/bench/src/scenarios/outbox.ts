import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { startNatsCluster } from '@idem/server/testing';
import { drizzle } from 'drizzle-orm/postgres-js';
import postgres from 'postgres';
import { type Child, startChild } from '../lib/child.js';
import { onCleanup } from '../lib/cleanup.js';
import { NATS_URL, quiet } from '../lib/config.js';
import { required } from '../lib/required.js';
import { nowMs } from '../lib/stats.js';
import { formatCount, formatMs, formatRate, verdictAtLeast } from '../lib/table.js';
import { runWorkers } from '../lib/workers.js';
import { createBenchStream } from '../outbox/benchStream.js';
import {
  BENCH_TOPIC,
  benchEvents,
  benchEventsWithoutNotify,
  CONSUMER_NAME,
  CREATE_CONSUMED_TABLE,
} from '../outbox/events.js';
import { judged, type RunContext } from './RunContext.js';

const PRODUCERS = 4;
const EVENTS_PER_TRANSACTION = 50;
/** Consumer batches (transactions) in flight on the NATS side. */
const NATS_CONSUMER_CONCURRENCY = 4;
/** Events per relay round, and so per consumer transaction in process. */
const RELAY_BATCH = Number(process.env.BENCH_RELAY_BATCH ?? 1_000);
/** The relay process's pool, and so the consumer transactions in flight per relay. */
const RELAY_POOL = 10;
/** Events through each pipeline before it is measured, numbered from WARM_UP_FIRST. */
const WARM_UP = 5_000;
const WARM_UP_FIRST = 1_000_000_000;
/**
 * The pipelines' producers enqueue with `notify: false` (NOTIFY serialises notifying
 * commits: see the enqueue rows), so their relays poll: `RELAY_MIN_POLL_MS` after a round
 * that found events, backing off to `RELAY_POLL_MS` when idle. `BENCH_OUTBOX_NOTIFY=1`
 * runs them with NOTIFY and LISTEN instead.
 */
const PIPELINE_NOTIFY = process.env.BENCH_OUTBOX_NOTIFY === '1';
const RELAY_POLL_MS = Number(process.env.BENCH_RELAY_POLL_MS ?? 50);
const RELAY_MIN_POLL_MS = Number(process.env.BENCH_RELAY_MIN_POLL_MS ?? 10);
const SCENARIO = 'outbox (enqueue → consumer commit)';
/** Throughput targets; the cluster is reported, not judged. */
const TARGETS: Record<'inprocess' | 'nats' | 'cluster', number | undefined> = {
  inprocess: 20_000,
  nats: 10_000,
  cluster: undefined,
};

/** Where events go: handlers in the relay's process, one NATS server, or a 3-node cluster. */
type Publisher = 'inprocess' | 'nats' | 'cluster';
type Db = ReturnType<typeof drizzle>;
type Events = typeof benchEvents;

/**
 * Outbox: events per second from `enqueue` to the consumer's commit, with 1 and 3 relays
 * (own processes, batches of `RELAY_BATCH`, polling: see PIPELINE_NOTIFY) feeding batch
 * consumers: in process (`handleBatch`, one transaction per relay round), through one NATS
 * JetStream server, and through a 3-node cluster with a 3-replica stream (started by the
 * scenario). The NATS consumer is its own process (`consumeJetStream` with `batchHandler`).
 *
 * - Warm-up: WARM_UP events through the fresh relay and consumer processes first (counted
 *   for duplicates and losses, left out of rate and lag): what is measured is a running
 *   pipeline, not Node compiling and optimising its modules.
 * - Throughput: a burst of events is enqueued (faster than any pipeline drains it) and the
 *   rate is events / (last consumer commit − first enqueue), by the database clock.
 * - Lag: then events are enqueued at half that rate for a few seconds; lag is each one's
 *   consumer commit time − its outbox row's creation time (the event's `createdAt`, which
 *   the consumer records: relays delete published rows). (Lag during the burst would only
 *   measure the queue the burst built.)
 * - `BENCH_TRACE=1` logs the outbox's unsent rows and the consumed rows every second while
 *   a pipeline drains: a relay that falls behind shows as unsent rows, a consumer as the gap.
 *   The NATS consumer also logs its transactions per second and how many held under ten
 *   events.
 * - Floor: one consumer transaction per event (inbox row + the consumer's row), what the
 *   pipeline committed before batch consumption; raw postgres-js running exactly that at
 *   the relay's concurrency shows how many such commits this machine can do at all, and
 *   so also how loaded the machine is during the run.
 */
export async function outbox(context: RunContext): Promise<void> {
  const { quick, sql } = context;
  const burst = quick ? 1_000 : 40_000;
  const pacedMs = quick ? 1_000 : 5_000;
  await sql.unsafe(CREATE_CONSUMED_TABLE);
  const client = postgres(context.databaseUrl, { ...quiet, max: PRODUCERS });
  const db = drizzle(client);
  const reset = () => sql`truncate idem_outbox, idem_inbox, bench_consumed`;
  try {
    await reset();
    await produceBurst(db, burst, 0, benchEvents); // warm-up
    for (const [events, how] of [
      [benchEvents, 'NOTIFY'],
      [benchEventsWithoutNotify, 'notify: false'],
    ] as const) {
      await reset();
      const produceMs = await produceBurst(db, burst, 0, events);
      context.report({
        scenario: SCENARIO,
        variant: `enqueue only, ${how} (${PRODUCERS} producers × ${EVENTS_PER_TRANSACTION}/tx)`,
        result: formatRate((burst / produceMs) * 1000, 'events/s'),
      });
    }

    await reset();
    const floor = await runWorkers(RELAY_POOL, quick ? 1_000 : 5_000, async (index) => {
      await client.begin(async (tx) => {
        const id = randomUUID();
        await tx`insert into idem_inbox (consumer, event_id) values (${CONSUMER_NAME}, ${id}) on conflict do nothing returning event_id`;
        await tx`insert into bench_consumed (event_id, n, created_at) values (${id}, ${index}, now())`;
      });
    });
    context.report({
      scenario: SCENARIO,
      variant: `floor: 1 consumer tx per event, raw (${RELAY_POOL} conn)`,
      result: formatRate(floor.perSecond, 'events/s'),
      note: 'BEGIN; inbox INSERT; consumer INSERT; COMMIT, prepared',
    });

    const variants: [Publisher, number][] = [
      ['inprocess', 1],
      ['inprocess', 3],
      ['nats', 1],
      ['nats', 3],
      ['cluster', 3],
    ];
    for (const [publisher, relays] of variants.filter(
      ([kind]) => (process.env.BENCH_OUTBOX_ONLY ?? kind) === kind,
    )) {
      await reset();
      context.log(`outbox: ${publisher}, ${relays} relay(s)`);
      if (publisher !== 'cluster') {
        await pipeline(context, db, publisher, relays, burst, pacedMs, [NATS_URL]);
        continue;
      }
      const cluster = await startNatsCluster({ size: 3, readyTimeoutMs: 60_000 });
      const stopCluster = onCleanup('stop the NATS cluster', () => cluster.stop());
      try {
        await pipeline(context, db, publisher, relays, burst, pacedMs, cluster.servers);
      } finally {
        await stopCluster();
      }
    }
  } finally {
    await client.end({ timeout: 5 });
  }
}

/** The pipelines' producers: see PIPELINE_NOTIFY. */
const pipelineEvents: Events = PIPELINE_NOTIFY ? benchEvents : benchEventsWithoutNotify;

/** `count` events numbered from `first`, by PRODUCERS loops of one transaction per batch. */
async function produceBurst(
  db: Db,
  count: number,
  first: number,
  events: Events = pipelineEvents,
): Promise<number> {
  let next = 0;
  const started = nowMs();
  await Promise.all(
    Array.from({ length: PRODUCERS }, async () => {
      while (next < count) {
        const from = next;
        next += EVENTS_PER_TRANSACTION;
        await enqueueRange(
          db,
          first + from,
          Math.min(EVENTS_PER_TRANSACTION, count - from),
          events,
        );
      }
    }),
  );
  return nowMs() - started;
}

function enqueueRange(db: Db, from: number, count: number, events: Events = pipelineEvents) {
  const batch = Array.from({ length: count }, (_, index) => ({
    topic: BENCH_TOPIC,
    payload: { n: from + index },
  }));
  return db.transaction((tx) => events.enqueue(tx, batch));
}

/** Events at `perSecond` for `durationMs`, numbered from `first`; returns how many. */
async function producePaced(
  db: Db,
  perSecond: number,
  durationMs: number,
  first: number,
): Promise<number> {
  const started = nowMs();
  let produced = 0;
  for (let elapsed = 0; elapsed < durationMs; elapsed = nowMs() - started) {
    const due = Math.floor((perSecond * elapsed) / 1000) - produced;
    if (due > 0) {
      await enqueueRange(db, first + produced, due);
      produced += due;
    }
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  return produced;
}

async function pipeline(
  context: RunContext,
  db: Db,
  publisher: Publisher,
  relays: number,
  burst: number,
  pacedMs: number,
  natsServers: string[],
): Promise<void> {
  const { quick, sql } = context;
  const children: Child[] = [];
  let subject = '';
  let deleteStream: (() => Promise<void>) | undefined;
  const where = {
    inprocess: 'in-process',
    nats: 'NATS JetStream',
    cluster: 'NATS JetStream, 3-node cluster (R3)',
  }[publisher];
  const label = `${where}, ${relays} relay${relays > 1 ? 's' : ''}`;
  const consumedCount = async () =>
    Number(required((await sql`select count(*)::int as n from bench_consumed`)[0], 'a count').n);
  const waitForConsumed = async (expected: number) => {
    const deadline = Date.now() + (quick ? 60_000 : 300_000);
    let lastLog = 0;
    while (Date.now() < deadline && (await consumedCount()) < expected) {
      if (process.env.BENCH_TRACE && Date.now() - lastLog > 1000) {
        lastLog = Date.now();
        const [row] =
          await sql`select count(*)::int as unsent, (select count(*)::int from bench_consumed) as consumed from idem_outbox`;
        context.log(`trace: outbox unsent ${row?.unsent} consumed ${row?.consumed}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  };
  try {
    if (publisher !== 'inprocess') {
      const benchStream = await createBenchStream(natsServers, publisher === 'cluster' ? 3 : 1);
      deleteStream = onCleanup(`delete NATS stream ${benchStream.name}`, () =>
        benchStream.delete(),
      );
      subject = benchStream.subject;
      children.push(
        await startChild(
          fileURLToPath(new URL('../outbox/natsConsumerProcess.ts', import.meta.url)),
          {
            env: {
              DATABASE_URL: context.databaseUrl,
              NATS_URL: natsServers.join(','),
              STREAM: benchStream.name,
              DURABLE: benchStream.durable,
              CONCURRENCY: String(NATS_CONSUMER_CONCURRENCY),
              MAX_BATCH: String(RELAY_BATCH),
            },
            nodeFlags: context.nodeFlags(`nats-consumer-${relays}`),
          },
        ),
      );
    }
    for (let index = 0; index < relays; index++) {
      children.push(
        await startChild(fileURLToPath(new URL('../outbox/relayProcess.ts', import.meta.url)), {
          env: {
            DATABASE_URL: context.databaseUrl,
            PUBLISHER: publisher === 'inprocess' ? 'inprocess' : 'nats',
            SUBJECT: subject,
            NATS_URL: natsServers.join(','),
            POOL_MAX: String(RELAY_POOL),
            BATCH_SIZE: String(RELAY_BATCH),
            ...(PIPELINE_NOTIFY
              ? {}
              : { POLL_MS: String(RELAY_POLL_MS), MIN_POLL_MS: String(RELAY_MIN_POLL_MS) }),
          },
          nodeFlags: context.nodeFlags(`relay-${publisher}-${relays}-${index + 1}`),
        }),
      );
    }

    // Warm-up: the children are fresh processes (modules just compiled, nothing optimised
    // yet); a long-running relay and consumer are not. Numbered apart, counted for
    // duplicates and losses like the rest, left out of rate and lag.
    const warmUp = quick ? 100 : WARM_UP;
    await produceBurst(db, warmUp, WARM_UP_FIRST);
    await waitForConsumed(warmUp);

    // Throughput: a burst, drained.
    await produceBurst(db, burst, 0);
    await waitForConsumed(warmUp + burst);
    const [throughput] = await sql<{ span_ms: number }[]>`
      select extract(epoch from max(consumed_at) - min(created_at)) * 1000 as span_ms
      from bench_consumed where n < ${burst}`;
    const rate = (burst / Number(required(throughput, 'the burst span').span_ms)) * 1000;

    // Lag: half that rate, sustained.
    const pacedRate = Math.max(10, Math.floor(rate / 2));
    const paced = await producePaced(db, pacedRate, pacedMs, burst);
    await waitForConsumed(warmUp + burst + paced);
    // Let a late duplicate, if any, land before counting.
    await new Promise((resolve) => setTimeout(resolve, quick ? 200 : 1_000));

    const [stats] = await sql<{ consumed: number; distinct: number; p50: number; p99: number }[]>`
      select count(*)::int as consumed, count(distinct event_id)::int as distinct,
        percentile_disc(0.5) within group (order by extract(epoch from consumed_at - created_at) * 1000)
          filter (where n >= ${burst} and n < ${WARM_UP_FIRST}) as p50,
        percentile_disc(0.99) within group (order by extract(epoch from consumed_at - created_at) * 1000)
          filter (where n >= ${burst} and n < ${WARM_UP_FIRST}) as p99
      from bench_consumed`;
    const { consumed, distinct, p50, p99 } = required(stats, 'the consumption stats');
    const expected = warmUp + burst + paced;
    const duplicates = consumed - distinct;
    const lost = expected - distinct;
    if (duplicates > 0) context.fail(`outbox ${label}: ${duplicates} events handled twice`);
    if (lost > 0)
      context.fail(`outbox ${label}: ${lost} of ${expected} events never reached the consumer`);
    context.report({
      scenario: SCENARIO,
      variant: label,
      result: formatRate(rate, 'events/s'),
      p50: formatMs(Number(p50)),
      p99: formatMs(Number(p99)),
      ...(TARGETS[publisher] === undefined
        ? {}
        : {
            target: `≥ ${formatCount(TARGETS[publisher])} events/s`,
            verdict: judged(context, verdictAtLeast(rate, TARGETS[publisher])),
          }),
      note: `lag at ${formatRate(pacedRate, 'events/s')}; ${formatCount(expected)} events, ${duplicates} dup, ${lost} lost${PIPELINE_NOTIFY ? '; NOTIFY' : ''}`,
    });
  } finally {
    for (const child of children.reverse()) await child.stop();
    await deleteStream?.();
  }
}
