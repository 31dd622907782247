import { performance } from 'node:perf_hooks';
import { sql } from 'drizzle-orm';
import { until } from '../fixtures/deferred.js';
import { connect, countOf, rows } from '../harness.js';
import { createFailoverSchema, type FailoverApp, startFailoverApp } from './failoverApp.js';
import { type KeyedIntent, type Ledger, newLedger, runTraffic } from './keyedTraffic.js';
import { type ReplicatedCluster, startReplicatedCluster } from './replicatedCluster.js';

/** What one failover run came to, as the test prints and asserts it. */
export interface FailoverReport {
  replication: 'synchronous' | 'asynchronous';
  replicationDelayMs: number;
  keys: number;
  requests: number;
  duplicateRequests: number;
  droppedReplies: number;
  /** Requests the client gave up on (no answer in time): a hang would show here. */
  timedOut: number;
  /** The key that took longest from its first request to a kept answer (a key left to its lease waits it out). */
  slowestKey: Ledger['slowestKey'];
  statuses: Record<string, number>;
  /** Keys acknowledged (a successful answer received) before the kill. */
  acknowledgedBeforeKill: number;
  killToPromotedMs: number;
  /** From the kill to the first successful write answered to a request sent after it. */
  recoveryMs: number | undefined;
  /** Transaction mode: keys with more than one order row on the promoted server. */
  duplicateOrders: number;
  /** Lease mode: runs of a handler that started after its key's answer had reached a client. */
  runsAfterAcknowledgement: number;
  /** Lease mode: charges the provider saw again for a key (caught by the derived key). */
  chargeRetries: number;
  /** Keys a client later got another answer for than the first one it received: acknowledged results lost. */
  changedAnswers: number;
  /** Acknowledged orders/charges (by the id in the answer) missing on the promoted server. */
  lostRows: number;
  /** Event ids the publisher delivered more than once (the relay is at-least-once). */
  eventsDeliveredTwice: number;
  /** Deliveries the consumer's inbox skipped as already handled. */
  inboxDuplicates: number;
  /** Event ids with more than one fulfilment row (the inbox failed to deduplicate). */
  eventsConsumedTwice: number;
  /** Requests the server took over 5 s to answer, or had not answered at the end, and how far their handler got. */
  slowRequests: ReturnType<FailoverApp['slowRequests']>;
  /** Their fulfilment rows, to tell what happened. */
  consumedTwice: { id: string; event_id: string; order_id: string }[];
  /** Orders on the promoted server with no fulfilment. */
  ordersNotFulfilled: number;
  deadLetters: number;
  relayTrouble: Record<string, number>;
  /** Why requests were answered 500, by the store error's code (`25006`: a connection on the standby before its promotion). */
  storeErrors: Record<string, number>;
}

/** Things a test started, ended by `cleanUp` in an `afterEach` even when the test failed. */
export type Cleanups = (() => Promise<void>)[];

export async function cleanUp(cleanups: Cleanups): Promise<void> {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
}

/** `count` intents alternating between the modes; every 5th a double click, two in four a dropped reply. */
export function intentsFor(count: number, prefix: string): KeyedIntent[] {
  return Array.from({ length: count }, (_, index) => ({
    key: `${prefix}-${index}`,
    mode: index % 2 === 0 ? 'transaction' : 'lease',
    duplicate: index % 5 === 0,
    dropFirstReply: index % 4 === 1 || index % 4 === 2,
  }));
}

/**
 * Starts a primary and a standby, the app and its relay on the multi-host URL, and `keys`
 * intents through `concurrency` clients; once a third of them have been answered, kills the
 * primary and promotes the standby; then waits for every intent to settle, asks every key
 * once more, waits for the outbox to drain, and reads what the promoted server holds.
 */
export async function runFailover(
  options: {
    synchronous: boolean;
    keys: number;
    concurrency: number;
    /** How far behind the standby runs (see `replicationDelayMs`). */
    replicationDelayMs?: number;
  },
  cleanups: Cleanups,
): Promise<FailoverReport> {
  const cluster = await startReplicatedCluster({
    synchronous: options.synchronous,
    database: 'failover',
    replicationDelayMs: options.replicationDelayMs ?? 0,
    onStop: (stop) => cleanups.push(stop),
  });
  await createFailoverSchema(cluster.primary.url);
  const app = await startFailoverApp(cluster.url);
  cleanups.push(() => app.close());

  const intents = intentsFor(options.keys, options.synchronous ? 'sync' : 'async');
  const ledger = newLedger();
  const traffic = runTraffic(intents, options.concurrency, { baseUrl: app.url, ledger });
  let trafficDone = false;
  traffic.then(
    () => (trafficDone = true),
    () => (trafficDone = true),
  );
  await until(() => trafficDone || ledger.acknowledged.size >= options.keys / 3, {
    what: 'a third of the keys to be answered',
    timeoutMs: 60_000,
  });
  const acknowledgedBeforeKill = ledger.acknowledged.size;
  const killedAt = await cluster.killPrimary();
  const goneAt = performance.now();
  await cluster.promoteStandby();
  const killToPromotedMs = performance.now() - killedAt;
  await traffic;

  // Every key once more, as a client that comes back later: each must be answered.
  const again = intents.map((intent) => ({ ...intent, duplicate: false, dropFirstReply: false }));
  await runTraffic(again, options.concurrency, { baseUrl: app.url, ledger });

  const observer = connect(cluster.standby.url, 1);
  cleanups.push(() => observer.$client.end({ timeout: 5 }));
  await until(
    async () =>
      (await countOf(
        observer,
        sql`select count(*)::int as n from idem_outbox where sent_at is null and dead_at is null`,
      )) === 0,
    { what: 'the relay to drain the outbox', timeoutMs: 60_000, intervalMs: 50 },
  );

  return {
    replication: options.synchronous ? 'synchronous' : 'asynchronous',
    replicationDelayMs: options.replicationDelayMs ?? 0,
    keys: options.keys,
    ...clientFacts(ledger, { killedAt, goneAt }, acknowledgedBeforeKill),
    killToPromotedMs: Math.round(killToPromotedMs),
    ...(await serverFacts(observer, app, ledger, intents)),
  };
}

/**
 * `killedAt`: the SIGKILL; `goneAt`: every process of the primary had exited. A backend
 * can still commit and answer between the two (it has not yet noticed its postmaster's
 * death), so the first write after the failover is the first one sent after `goneAt`.
 */
function clientFacts(
  ledger: Ledger,
  { killedAt, goneAt }: { killedAt: number; goneAt: number },
  acknowledgedBeforeKill: number,
) {
  const firstWrite = Math.min(
    ...ledger.originals.filter((each) => each.sentAt > goneAt).map((each) => each.answeredAt),
  );
  return {
    requests: ledger.requests,
    duplicateRequests: ledger.duplicateRequests,
    droppedReplies: ledger.droppedReplies,
    timedOut: ledger.timedOut,
    slowestKey: ledger.slowestKey,
    statuses: Object.fromEntries([...ledger.statuses].map(([status, n]) => [String(status), n])),
    acknowledgedBeforeKill,
    recoveryMs: Number.isFinite(firstWrite) ? Math.round(firstWrite - killedAt) : undefined,
    changedAnswers: new Set(ledger.mismatches.map((mismatch) => mismatch.key)).size,
  };
}

async function serverFacts(
  observer: ReturnType<typeof connect>,
  app: FailoverApp,
  ledger: Ledger,
  intents: readonly KeyedIntent[],
) {
  const orders = await rows<{ key: string; id: string; run_id: string }>(
    observer,
    sql`select key, id::text as id, run_id from failover_orders`,
  );
  const charges = await rows<{ key: string; id: string; attempts: number }>(
    observer,
    sql`select key, id::text as id, attempts from failover_charges`,
  );
  const fulfilments = await rows<{ id: string; event_id: string; order_id: string }>(
    observer,
    sql`select id::text as id, event_id::text as event_id, order_id from failover_fulfilments`,
  );
  const ordersPerKey = countBy(orders.map((order) => order.key));
  const fulfilmentsPerEvent = countBy(fulfilments.map((each) => each.event_id));
  const fulfilled = new Set(fulfilments.map((each) => each.order_id));
  // An order by the run that wrote it (a lost order's id can be handed out again), a charge by its id.
  const held = new Set([
    ...orders.map((order) => `${order.key}:${order.run_id}`),
    ...charges.map((charge) => `${charge.key}:${charge.id}`),
  ]);
  const lostRows = intents.filter((intent) => {
    const answer = ledger.acknowledged.get(intent.key);
    if (!answer) return false;
    const { runId, chargeId } = JSON.parse(answer.body) as { runId: string; chargeId?: string };
    return !held.has(`${intent.key}:${intent.mode === 'transaction' ? runId : chargeId}`);
  }).length;
  const runsAfterAcknowledgement = intents
    .filter((intent) => intent.mode === 'lease')
    .map((intent) => {
      const acknowledgedAt = ledger.acknowledged.get(intent.key)?.at ?? Number.POSITIVE_INFINITY;
      return (app.runsStarted.get(intent.key) ?? []).filter((at) => at > acknowledgedAt).length;
    })
    .reduce((sum, n) => sum + n, 0);
  return {
    duplicateOrders: [...ordersPerKey.values()].filter((n) => n > 1).length,
    runsAfterAcknowledgement,
    chargeRetries: charges.reduce((sum, charge) => sum + charge.attempts - 1, 0),
    lostRows,
    eventsDeliveredTwice: [...app.deliveries.values()].filter((n) => n > 1).length,
    inboxDuplicates: app.inboxDuplicates(),
    eventsConsumedTwice: [...fulfilmentsPerEvent.values()].filter((n) => n > 1).length,
    consumedTwice: fulfilments.filter((each) => (fulfilmentsPerEvent.get(each.event_id) ?? 0) > 1),
    ordersNotFulfilled: orders.filter((order) => !fulfilled.has(order.id)).length,
    deadLetters: await countOf(
      observer,
      sql`select count(*)::int as n from idem_outbox where dead_at is not null`,
    ),
    relayTrouble: Object.fromEntries(app.relayTrouble),
    storeErrors: Object.fromEntries(app.storeErrors),
    slowRequests: app.slowRequests(),
  };
}

function countBy(values: readonly string[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const value of values) counts.set(value, (counts.get(value) ?? 0) + 1);
  return counts;
}

export type { ReplicatedCluster };
