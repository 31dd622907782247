import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { sql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/postgres-js';
import postgres from 'postgres';
import { z } from 'zod';
import { idempotentHandler } from '../../src/fetch/index.js';
import { defineEvents } from '../../src/outbox/defineEvents.js';
import { idempotentConsumer } from '../../src/outbox/inbox/idempotentConsumer.js';
import type { Relay, RelayEvent } from '../../src/outbox/index.js';
import type { Publisher } from '../../src/outbox/OutboxMessage.js';
import { createRelay } from '../../src/outbox/relay/createRelay.js';
import { hasCode, isConnectionError } from '../../src/postgres/connectionError.js';
import { migrate } from '../../src/postgres/migrate.js';
import { type FetchServer, serveFetch } from '../../src/testing/serveFetch.js';
import { connect, rows } from '../harness.js';

/** The app's own tables: orders (transaction mode), charges (lease mode), fulfilments (the consumer). */
export async function createFailoverSchema(url: string): Promise<void> {
  const db = connect(url, 1);
  try {
    await migrate(db);
    await db.execute(sql`create table failover_orders (
      id bigserial primary key, key text not null, run_id text not null)`);
    await db.execute(sql`create table failover_charges (
      id bigserial primary key, charge_key text not null unique, key text not null,
      attempts int not null default 1)`);
    await db.execute(sql`create table failover_fulfilments (
      id bigserial primary key, event_id uuid not null, order_id text not null)`);
  } finally {
    await db.$client.end({ timeout: 5 });
  }
}

const events = defineEvents({
  'order.placed': z.object({ orderId: z.string(), key: z.string() }),
});

/** Every key's order runs once; an idem scope of one principal, so keys are comparable across modes. */
const scope = () => 'failover-client';

/** The paths the app serves, one per execution mode. */
export const PATHS = { transaction: '/orders', lease: '/charges' } as const;
export type Mode = keyof typeof PATHS;

/** The lease: long enough to outlast a failover, so a completion retried on the promoted node still holds it. */
export const LEASE_MS = 10_000;

/**
 * A postgres.js pool on the cluster. Its reconnect backoff is bounded at half a second: by
 * default postgres.js waits up to 20 s before a connection's next attempt, growing with
 * every failed attempt of the whole pool, so after a failover of a second requests waited
 * up to 20 s for a connection to a primary that was already there.
 */
function clusterClient(url: string, max: number) {
  return drizzle(
    postgres(url, {
      max,
      onnotice: () => {},
      backoff: (retries: number) => Math.min(0.05 * 2 ** retries, 0.5),
    }),
  );
}

/** A request slower than this is listed in the report. */
const SLOW_MS = 5_000;

export interface FailoverApp {
  /** The app's base URL. */
  url: string;
  /** When each run of a handler started (`performance.now()`), by key. */
  runsStarted: Map<string, number[]>;
  /** How many times the publisher delivered each event id. */
  deliveries: Map<string, number>;
  /** Deliveries the consumer's inbox recognised as already handled. */
  inboxDuplicates: () => number;
  /** The relay's reports of errors and outages, by type. */
  relayTrouble: Map<string, number>;
  /** The store errors requests were answered 500 for, by the error's code (SQLSTATE or driver's). */
  storeErrors: Map<string, number>;
  /**
   * Requests that took longer than {@link SLOW_MS} to answer, or have not been answered
   * yet: the key, how long, and the runs of that key since the request came in (`handler`
   * when one started, `returned` when its response was ready for idem to store). Those may
   * be another request's with the same key (a double click): a request whose claim never
   * settled can show a run that was not its own.
   */
  slowRequests(): { key: string; ms: number; answered: boolean; reached: string[] }[];
  relay: Relay;
  close(): Promise<void>;
}

/**
 * The app under test, on `databaseUrl` (the cluster's multi-host URL): a transaction-mode
 * order endpoint that writes its order and an `order.placed` event in the key's
 * transaction, a lease-mode charge endpoint whose charge (a recovery point) the "provider"
 * table deduplicates by the derived key, served over HTTP; and a relay that drains the
 * outbox to an in-process publisher whose consumer writes a fulfilment per event through
 * the inbox.
 */
export async function startFailoverApp(databaseUrl: string): Promise<FailoverApp> {
  const db = clusterClient(databaseUrl, 10);
  const relayDb = clusterClient(databaseUrl, 4);
  const runsStarted = new Map<string, number[]>();
  /** When each run's response was ready, by key. */
  const returned = new Map<string, number[]>();
  const ready = (key: string) =>
    returned.set(key, [...(returned.get(key) ?? []), performance.now()]);
  const storeErrors = new Map<string, number>();
  const onStoreError = (error: unknown) => {
    const code = codeOf(error);
    storeErrors.set(code, (storeErrors.get(code) ?? 0) + 1);
  };
  const started = (key: string) =>
    runsStarted.set(key, [...(runsStarted.get(key) ?? []), performance.now()]);

  const orders = idempotentHandler(
    { mode: 'transaction', db, scope, route: PATHS.transaction, onStoreError },
    async (_request, idempotency) => {
      started(idempotency.key);
      const runId = randomUUID();
      const [order] = await rows<{ id: string }>(
        idempotency.tx,
        sql`insert into failover_orders (key, run_id) values (${idempotency.key}, ${runId})
            returning id::text as id`,
      );
      const orderId = order?.id ?? 'none';
      await events.enqueue(idempotency.tx, {
        topic: 'order.placed',
        payload: { orderId, key: idempotency.key },
      });
      ready(idempotency.key);
      return Response.json({ orderId, runId });
    },
  );
  const charges = idempotentHandler(
    { db, scope, route: PATHS.lease, leaseMs: LEASE_MS, onStoreError },
    async (_request, idempotency) => {
      started(idempotency.key);
      const chargeKey = idempotency.deriveKey('charge');
      const chargeId = await idempotency.step('charge', async () => {
        const [charge] = await rows<{ id: string }>(
          db,
          sql`insert into failover_charges (charge_key, key) values (${chargeKey}, ${idempotency.key})
              on conflict (charge_key) do update set attempts = failover_charges.attempts + 1
              returning id::text as id`,
        );
        return charge?.id ?? 'none';
      });
      ready(idempotency.key);
      return Response.json({ chargeId, runId: randomUUID() });
    },
  );
  const inFlight = new Set<{ key: string; since: number; answered: boolean }>();
  const slow: { key: string; ms: number; answered: boolean; reached: string[] }[] = [];
  const server: FetchServer = await serveFetch(async (request) => {
    const call = {
      key: request.headers.get('idempotency-key') ?? '',
      since: performance.now(),
      answered: false,
    };
    inFlight.add(call);
    try {
      return await (new URL(request.url).pathname === PATHS.transaction
        ? orders(request)
        : charges(request));
    } finally {
      inFlight.delete(call);
      const ms = performance.now() - call.since;
      if (ms > SLOW_MS)
        slow.push({ key: call.key, ms: Math.round(ms), answered: true, reached: reached(call) });
    }
  });
  const reached = (call: { key: string; since: number }) => [
    ...(runsStarted.get(call.key) ?? []).filter((at) => at >= call.since).map(() => 'handler'),
    ...(returned.get(call.key) ?? []).filter((at) => at >= call.since).map(() => 'returned'),
  ];

  const deliveries = new Map<string, number>();
  let inboxDuplicates = 0;
  const consumer = idempotentConsumer({ db: relayDb, name: 'fulfilment' });
  const publisher: Publisher = {
    async publish(message) {
      const { orderId } = message.payload as { orderId: string };
      const result = await consumer.handle(message, (tx) =>
        tx.execute(
          sql`insert into failover_fulfilments (event_id, order_id) values (${message.id}, ${orderId})`,
        ),
      );
      if (result.status === 'duplicate') inboxDuplicates++;
      deliveries.set(message.id, (deliveries.get(message.id) ?? 0) + 1);
    },
    // The consumer's database is the cluster: while it fails over, a delivery waits
    // without counting an attempt (25006: a connection that reached the standby first).
    isTransientError: (error) => isConnectionError(error) || hasCode(error, '25006'),
  };
  const relayTrouble = new Map<string, number>();
  const relay = createRelay({
    db: relayDb,
    publisher,
    batchSize: 20,
    pollIntervalMs: 100,
    leaseMs: 5_000,
    maxAttempts: 1_000,
    backoff: { baseDelayMs: 50, maxDelayMs: 500 },
    onEvent: (event: RelayEvent) => {
      if (event.type !== 'published') {
        relayTrouble.set(event.type, (relayTrouble.get(event.type) ?? 0) + 1);
      }
    },
  });
  await relay.start();

  return {
    url: server.url,
    runsStarted,
    deliveries,
    inboxDuplicates: () => inboxDuplicates,
    relayTrouble,
    storeErrors,
    slowRequests: () => [
      ...slow,
      ...[...inFlight].map((call) => ({
        key: call.key,
        ms: Math.round(performance.now() - call.since),
        answered: false,
        reached: reached(call),
      })),
    ],
    relay,
    async close() {
      await relay.stop();
      await server.close();
      await db.$client.end({ timeout: 5 });
      await relayDb.$client.end({ timeout: 5 });
    },
  };
}

/** The first string `code` down an error's chain of causes (Drizzle wraps the driver's error). */
function codeOf(error: unknown): string {
  for (let current = error, depth = 0; depth < 5; depth++) {
    if (typeof current !== 'object' || current === null) break;
    const { code, cause } = current as { code?: unknown; cause?: unknown };
    if (typeof code === 'string') return code;
    current = cause;
  }
  return 'unknown';
}
