/**
 * The chaos soak's NATS phase: the outbox pipeline (relay processes → a stream with 3
 * replicas on a 3-node JetStream cluster → a batch-consuming process) while the node that
 * leads the stream is SIGKILLed mid-run and brought back. Counts, from the database, the
 * events lost and the events processed twice; both must be 0.
 */
import { fileURLToPath } from 'node:url';
import { startNatsCluster } from '@idem/server/testing';
import { drizzle } from 'drizzle-orm/postgres-js';
import postgres from 'postgres';
import { type Child, startChild } from '../lib/child.js';
import { onCleanup } from '../lib/cleanup.js';
import { quiet } from '../lib/config.js';
import { createBenchStream } from '../outbox/benchStream.js';
import { BENCH_TOPIC, benchEvents, CREATE_CONSUMED_TABLE } from '../outbox/events.js';

export interface ClusterPhaseSettings {
  databaseUrl: string;
  /** Events enqueued over the phase. */
  events: number;
  /** Enqueued per second (in transactions of 50). */
  perSecond: number;
  /** Leader kills, spread over the production. */
  kills: number;
  relays: number;
  log: (message: string) => void;
}

export interface ClusterPhaseResult {
  events: number;
  /** Leaders killed: `old → new`. */
  leaderChanges: string[];
  /** Publishes the relays saw fail (their own retries), and their outage pauses. */
  relayFailed: number;
  relayPublished: number;
  /** Copies the consumer's inbox recognised and skipped (redeliveries, caught). */
  consumerDuplicates: number;
  /** Consumer-side failures (nak'ed or rejected messages). */
  consumerFailures: number;
  streamMessages: number;
  duplicates: number;
  lost: number;
  durationMs: number;
  problems: string[];
}

const PER_TRANSACTION = 50;
const RELAY_MODULE = fileURLToPath(new URL('../outbox/relayProcess.ts', import.meta.url));
const CONSUMER_MODULE = fileURLToPath(new URL('../outbox/natsConsumerProcess.ts', import.meta.url));

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function until(what: string, timeoutMs: number, check: () => Promise<boolean>) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(100);
  }
}

export async function natsClusterPhase(
  settings: ClusterPhaseSettings,
): Promise<ClusterPhaseResult> {
  const { log } = settings;
  const startedAt = Date.now();
  const problems: string[] = [];
  const client = postgres(settings.databaseUrl, { ...quiet, max: 2 });
  const db = drizzle(client);
  const closeClient = onCleanup('close the NATS phase client', () => client.end({ timeout: 2 }));
  const cluster = await startNatsCluster({ size: 3, readyTimeoutMs: 60_000 });
  const stopCluster = onCleanup('stop the NATS cluster', () => cluster.stop());
  const children: Child[] = [];
  const leaderChanges: string[] = [];
  try {
    await client.unsafe(CREATE_CONSUMED_TABLE);
    const stream = await createBenchStream(cluster.servers, 3);
    const deleteStream = onCleanup(`delete NATS stream ${stream.name}`, () => stream.delete());
    const natsUrl = cluster.servers.join(',');
    children.push(
      await startChild(CONSUMER_MODULE, {
        env: {
          DATABASE_URL: settings.databaseUrl,
          NATS_URL: natsUrl,
          STREAM: stream.name,
          DURABLE: stream.durable,
          CONCURRENCY: '2',
          MAX_BATCH: '200',
        },
      }),
    );
    const relays: Child[] = [];
    for (let index = 0; index < settings.relays; index++) {
      relays.push(
        await startChild(RELAY_MODULE, {
          env: {
            DATABASE_URL: settings.databaseUrl,
            PUBLISHER: 'nats',
            SUBJECT: stream.subject,
            NATS_URL: natsUrl,
            POOL_MAX: '4',
            BATCH_SIZE: '200',
          },
        }),
      );
    }
    children.push(...relays);

    const consumed = async () =>
      Number((await client`select count(distinct event_id)::int as n from bench_consumed`)[0]?.n);
    const leader = async () => {
      let name: string | undefined;
      await until('the stream to have a leader', 60_000, async () => {
        name = await stream.leader();
        return name !== undefined;
      });
      return name as string;
    };

    // The killer: at evenly spaced points of the production, SIGKILL the stream's leader,
    // wait for the cluster to elect another, then bring the killed node back. Production
    // goes on meanwhile, but waits at the next point for the previous node to be back, so
    // that every kill lands mid-run.
    const killAt = Array.from({ length: settings.kills }, (_, index) =>
      Math.floor(((index + 1) * settings.events) / (settings.kills + 2)),
    );
    let produced = 0;
    const killedAndBack: Promise<void>[] = [];
    const killLeader = async () => {
      const victim = cluster.node(await leader());
      log(`NATS: SIGKILL ${victim.name}, the stream leader (${produced} events enqueued)`);
      await victim.kill();
      let successor = victim.name;
      await until('a new stream leader', 60_000, async () => {
        successor = (await stream.leader()) ?? victim.name;
        return successor !== victim.name;
      });
      leaderChanges.push(`${victim.name} → ${successor}`);
      log(`NATS: ${successor} leads the stream; restarting ${victim.name}`);
      await victim.start();
    };

    const startedProducing = Date.now();
    for (let from = 0; from < settings.events; from += PER_TRANSACTION) {
      const count = Math.min(PER_TRANSACTION, settings.events - from);
      await db.transaction((tx) =>
        benchEvents.enqueue(
          tx,
          Array.from({ length: count }, (_, index) => ({
            topic: BENCH_TOPIC,
            payload: { n: from + index },
          })),
        ),
      );
      produced = from + count;
      const nextKill = killedAndBack.length;
      if (nextKill < killAt.length && produced >= (killAt[nextKill] as number)) {
        await killedAndBack[nextKill - 1];
        const killing = killLeader();
        killing.catch(() => undefined); // awaited below; not an unhandled rejection meanwhile
        killedAndBack.push(killing);
      }
      const dueAt = startedProducing + (produced / settings.perSecond) * 1000;
      if (dueAt > Date.now()) await sleep(dueAt - Date.now());
    }
    await Promise.all(killedAndBack);
    log(`NATS: ${settings.events} events enqueued; waiting for the consumer`);
    await until(`all ${settings.events} events to be consumed`, 180_000, async () => {
      return (await consumed()) >= settings.events;
    });
    // A late redelivery, if any, lands before counting.
    await sleep(1_000);

    const [counts] = await client<{ rows: number; distinct: number; lost: number }[]>`
      select (select count(*)::int from bench_consumed) as rows,
        (select count(distinct event_id)::int from bench_consumed) as distinct,
        (select count(*)::int from generate_series(0, ${settings.events - 1}) as e(n)
          where not exists (select 1 from bench_consumed c where c.n = e.n)) as lost`;
    const relayStats = await Promise.all(
      relays.map((relay) => relay.request<{ failed: number; published: number }>('stats')),
    );
    const consumerStats = await children[0]?.request<{ failures: number; duplicates: number }>(
      'stats',
    );
    const streamMessages = await stream.messages();
    await deleteStream();
    if (streamMessages !== settings.events) {
      problems.push(
        `the stream holds ${streamMessages} messages for ${settings.events} events (JetStream deduplication by event id)`,
      );
    }
    return {
      events: settings.events,
      leaderChanges,
      relayFailed: relayStats.reduce((sum, stats) => sum + stats.failed, 0),
      relayPublished: relayStats.reduce((sum, stats) => sum + stats.published, 0),
      consumerDuplicates: consumerStats?.duplicates ?? 0,
      consumerFailures: consumerStats?.failures ?? 0,
      streamMessages,
      duplicates: (counts?.rows ?? 0) - (counts?.distinct ?? 0),
      lost: counts?.lost ?? settings.events,
      durationMs: Date.now() - startedAt,
      problems,
    };
  } finally {
    for (const child of children.reverse()) await child.stop();
    await stopCluster();
    await closeClient();
  }
}
