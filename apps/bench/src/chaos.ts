/**
 * `pnpm chaos [--short] [--no-postgres-restart] [--no-nats-cluster]`: the soak that proves
 * "exactly once from outside". N app servers (own processes) behind a proxy that loses
 * requests and replies, servers SIGKILLed at random and restarted, one PostgreSQL restart
 * mid-run, and clients built with @idem/client (keyed retries). At the end every logical
 * request must have run exactly once and every answer must equal the stored outcome. Then
 * the outbox through a 3-node NATS JetStream cluster whose stream leader is killed mid-run:
 * every event consumed exactly once. Exits 1 otherwise.
 * Bounded in requests, kills and time; all traffic stays on 127.0.0.1.
 */
import { fileURLToPath } from 'node:url';
import { seededRandom } from '@idem/core/testing';
import { migrate } from '@idem/server/postgres';
import { drizzle } from 'drizzle-orm/postgres-js';
import postgres from 'postgres';
import { CREATE_CHAOS_TABLES } from './chaos/chaosSchema.js';
import { chaosClient, clientCounters, type LogicalRequest, sendAll } from './chaos/clients.js';
import { type ClusterPhaseResult, natsClusterPhase } from './chaos/natsClusterPhase.js';
import { ensurePostgresUp, restartPostgres } from './chaos/postgresRestart.js';
import { startFaultyProxy } from './chaos/proxy.js';
import { startFleet } from './chaos/serverFleet.js';
import { verify } from './chaos/verify.js';
import { onCleanup, runMain } from './lib/cleanup.js';
import { quiet } from './lib/config.js';
import { currentLoad } from './lib/machine.js';
import { createScratchDatabase } from './lib/scratchDatabase.js';

const SERVER_MODULE = fileURLToPath(new URL('./chaos/chaosServer.ts', import.meta.url));

interface Settings {
  servers: number;
  requests: number;
  workers: number;
  /** Ceiling on the chaos phase; the monkey stops then, clients finish without faults. */
  maxChaosMs: number;
  killEveryMs: [number, number];
  maxKills: number;
  restartAfterMs: [number, number];
  postgresRestart: boolean;
  dropReplyRate: number;
  dropRequestRate: number;
  seed: number;
  /** The NATS cluster phase, or `undefined` to skip it. */
  natsCluster: { events: number; perSecond: number; kills: number; relays: number } | undefined;
}

function settingsFrom(argv: readonly string[]): Settings {
  const short = argv.includes('--short');
  const seedArg = argv.find((arg) => arg.startsWith('--seed='));
  return {
    servers: short ? 2 : 3,
    requests: short ? 600 : 5_000,
    workers: short ? 8 : 16,
    maxChaosMs: short ? 60_000 : 240_000,
    killEveryMs: short ? [1_000, 2_500] : [1_500, 4_000],
    maxKills: short ? 3 : 20,
    restartAfterMs: [200, 1_000],
    postgresRestart: !argv.includes('--no-postgres-restart'),
    dropReplyRate: 0.2,
    dropRequestRate: 0.05,
    seed: seedArg ? Number(seedArg.slice('--seed='.length)) : Date.now() % 1_000_000,
    natsCluster: argv.includes('--no-nats-cluster')
      ? undefined
      : short
        ? { events: 4_000, perSecond: 1_000, kills: 1, relays: 2 }
        : { events: 20_000, perSecond: 2_000, kills: 2, relays: 3 },
  };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

runMain(async () => {
  const settings = settingsFrom(process.argv.slice(2));
  const random = seededRandom(settings.seed);
  const between = ([low, high]: [number, number]) => low + random() * (high - low);
  const startedAt = Date.now();
  const log = (message: string) =>
    console.error(`[chaos ${((Date.now() - startedAt) / 1000).toFixed(1)}s] ${message}`);
  log(`seed ${settings.seed}; load average ${currentLoad()}`);
  const loadBefore = currentLoad();

  // Whatever happens, leave the machine's PostgreSQL running.
  onCleanup('make sure PostgreSQL is up', () => ensurePostgresUp());
  const scratch = await createScratchDatabase('idem_chaos');
  const sql = postgres(scratch.url, { ...quiet, max: 2 });
  onCleanup('close the chaos client', () => sql.end({ timeout: 2 }).catch(() => undefined));
  await migrate(drizzle(sql));
  await sql.unsafe(CREATE_CHAOS_TABLES);

  const fleet = await startFleet({
    module: SERVER_MODULE,
    count: settings.servers,
    env: { DATABASE_URL: scratch.url, POOL_MAX: '5' },
    restartAfterMs: () => between(settings.restartAfterMs),
    log,
  });
  onCleanup('stop the servers', () => fleet.stop());
  const proxy = await startFaultyProxy({
    backends: fleet.ports,
    dropReplyRate: settings.dropReplyRate,
    dropRequestRate: settings.dropRequestRate,
    random,
  });
  onCleanup('close the proxy', () => proxy.close());

  const runId = Math.random().toString(36).slice(2, 8);
  const requests: LogicalRequest[] = Array.from({ length: settings.requests }, (_, index) => ({
    index,
    procedure: index % 2 === 0 ? 'placeOrder' : 'charge',
    key: `chaos-${runId}-${index}`,
    input: { businessId: `biz-${runId}-${index}`, amountCents: 100 + index },
  }));
  const counters = clientCounters();
  const client = chaosClient(proxy.url, counters);

  let done = 0;
  let postgresRestarts = 0;
  let postgresDownMs = 0;
  let chaosOver = false;
  const problems: string[] = [];

  const clients = sendAll(client, requests, settings.workers, () => {
    done++;
  }).finally(() => {
    chaosOver = true;
  });

  // No kills while PostgreSQL restarts and the pools are probed, so every server's pool is
  // seen reconnecting (or not).
  let monkeyPaused = false;
  const monkey = (async () => {
    const chaosEndsAt = Date.now() + settings.maxChaosMs;
    // The first kill early (at 10 % of the requests), so even a short run has one.
    while (!chaosOver && done < settings.requests * 0.1) await sleep(20);
    for (
      let wait = 0;
      !chaosOver && Date.now() < chaosEndsAt && fleet.kills < settings.maxKills;
    ) {
      await sleep(wait);
      if (chaosOver) break;
      if (monkeyPaused) continue;
      const victim = await fleet.killOne(random);
      if (victim) log(`SIGKILL ${victim} (${done}/${settings.requests} requests done)`);
      wait = between(settings.killEveryMs);
    }
  })();

  /**
   * Per server that was up when PostgreSQL went down: its pool reconnected in place, it
   * crashed by itself (and was restarted), the soak killed it meanwhile, or it did not
   * answer (its pool did not reconnect: a failure).
   */
  const afterRestart = new Map<string, 'reconnected' | 'crashed' | 'killed' | 'no answer'>();
  const postgresRestart = (async () => {
    if (!settings.postgresRestart) return;
    while (!chaosOver && done < settings.requests * 0.4) await sleep(100);
    if (chaosOver) return;
    monkeyPaused = true;
    await fleet.allUp();
    log(`restarting PostgreSQL (${done}/${settings.requests} requests done)`);
    const restartStartedAt = Date.now();
    const before = fleet.pids();
    try {
      postgresDownMs = await restartPostgres();
      postgresRestarts++;
      log(`PostgreSQL is back after ${postgresDownMs} ms`);
      // Give every pool a moment to notice, then ask each server (directly) for a query.
      await sleep(1_000);
      const probes = await fleet.probe();
      for (const [server, pid] of before) {
        const probe = probes.find((candidate) => candidate.server === server);
        const crashed = fleet.crashes.some(
          (crash) => crash.server === server && crash.at >= restartStartedAt,
        );
        afterRestart.set(
          server,
          probe?.ok && probe.pid === pid
            ? 'reconnected'
            : crashed
              ? 'crashed'
              : probe?.pid !== pid
                ? 'killed'
                : 'no answer',
        );
      }
      log(
        `after the restart: ${[...afterRestart].map(([server, state]) => `${server} ${state}`).join(', ')}`,
      );
    } catch (error) {
      problems.push(`PostgreSQL restart failed: ${String(error)}`);
      await ensurePostgresUp();
    } finally {
      monkeyPaused = false;
    }
  })();

  await clients;
  await Promise.all([monkey, postgresRestart]);
  log(
    `chaos over: ${done} requests sent, ${fleet.kills} kills, ${postgresRestarts} PostgreSQL restart(s)`,
  );

  // Recovery pass: a call whose client gave up is sent again with the same key, as a user
  // pressing "retry" later would (every server up, no faults).
  proxy.setFaults(false);
  await fleet.allUp();
  const unanswered = requests.filter((request) => request.answer === undefined);
  for (const request of unanswered) request.recovered = true;
  if (unanswered.length > 0) {
    log(`recovery pass: ${unanswered.length} calls without an answer are sent again`);
    await sendAll(client, unanswered, settings.workers);
  }

  const verdict = await verify(sql, requests);
  const finalProbe = await fleet.probe();
  await fleet.stop();

  let nats: ClusterPhaseResult | undefined;
  if (settings.natsCluster) {
    log('NATS cluster phase: the outbox through a 3-node JetStream cluster');
    try {
      nats = await natsClusterPhase({ databaseUrl: scratch.url, log, ...settings.natsCluster });
      problems.push(...nats.problems);
    } catch (error) {
      problems.push(
        `NATS cluster phase: ${error instanceof Error ? error.message : String(error)}`,
      );
    }
  }

  const line = (label: string, value: number | string) =>
    console.log(`  ${label.padEnd(34)} ${value}`);
  console.log('');
  console.log(
    `idem chaos${process.argv.includes('--short') ? ' --short' : ''} — seed ${settings.seed}, ${((Date.now() - startedAt) / 1000).toFixed(1)} s`,
  );
  console.log(
    `  servers ${settings.servers}, client loops ${settings.workers}, reply drop ${settings.dropReplyRate * 100} %, request drop ${settings.dropRequestRate * 100} %; load average before ${loadBefore}, after ${currentLoad()}`,
  );
  line('logical requests', requests.length);
  line(
    '  transaction mode (placeOrder)',
    requests.filter((request) => request.procedure === 'placeOrder').length,
  );
  line(
    '  lease mode (charge)',
    requests.filter((request) => request.procedure === 'charge').length,
  );
  line('HTTP attempts', counters.attempts);
  line('retries (keyedRetryLink)', counters.retries);
  line('replays (Idempotent-Replayed)', counters.replays);
  line('409 in progress / lease lost', counters.conflicts);
  line('no response (dropped, reset)', counters.noResponse);
  line('replies dropped by the proxy', proxy.counters.droppedReplies);
  line('requests dropped by the proxy', proxy.counters.droppedRequests);
  line('502 from the proxy', proxy.counters.badGateway);
  line('takeovers (lease mode)', verdict.takeovers);
  line('provider repeats (deduplicated)', verdict.providerRepeats);
  line('server SIGKILLs', fleet.kills);
  line('server crashes (their own)', fleet.crashes.length);
  for (const reason of new Set(fleet.crashes.map((crash) => crash.reason))) {
    line('', `${fleet.crashes.filter((crash) => crash.reason === reason).length} × ${reason}`);
  }
  line(
    'PostgreSQL restarts',
    `${postgresRestarts}${postgresRestarts ? ` (${postgresDownMs} ms until it answered)` : ''}`,
  );
  if (postgresRestarts > 0) {
    const count = (state: string) =>
      [...afterRestart.values()].filter((value) => value === state).length;
    line(
      'pools after the PostgreSQL restart',
      `${count('reconnected')} of ${afterRestart.size} reconnected in place, ${count('crashed')} crashed (restarted), ${count('killed')} killed by the soak meanwhile`,
    );
  }
  line('answered only by the recovery pass', unanswered.length);
  line('duplicates', verdict.duplicates);
  line('lost', verdict.lost);
  line('answers ≠ stored outcome', verdict.wrongAnswers);
  if (nats) {
    console.log(
      `  outbox through a 3-node NATS JetStream cluster (stream R3), ${(nats.durationMs / 1000).toFixed(1)} s`,
    );
    line('  events enqueued', nats.events);
    line('  stream leaders killed', nats.leaderChanges.join(', ') || 'none');
    line('  relay publishes failed (retried)', nats.relayFailed);
    line('  events published and settled', nats.relayPublished);
    line('  stream messages', nats.streamMessages);
    line('  redeliveries the inbox skipped', nats.consumerDuplicates);
    line('  consumer failures', nats.consumerFailures);
    line('  processed twice', nats.duplicates);
    line('  lost', nats.lost);
  }

  const failures = [...problems, ...verdict.problems];
  if (settings.postgresRestart && postgresRestarts !== 1)
    failures.push('the PostgreSQL restart did not happen');
  if (fleet.kills === 0) failures.push('no server was killed');
  for (const [server, state] of afterRestart) {
    if (state === 'no answer')
      failures.push(`${server}'s pool did not reconnect after the PostgreSQL restart`);
  }
  for (const probe of finalProbe) {
    if (!probe.ok)
      failures.push(`${probe.server} cannot reach the database at the end (${probe.detail})`);
  }
  if (nats && nats.duplicates + nats.lost > 0) {
    failures.push(`NATS cluster phase: ${nats.duplicates} processed twice, ${nats.lost} lost`);
  }
  if (nats && nats.leaderChanges.length === 0) failures.push('no NATS stream leader was killed');
  if (verdict.duplicates + verdict.lost + verdict.wrongAnswers > 0 || failures.length > 0) {
    console.log('\nFAILED');
    for (const failure of failures) console.log(`  - ${failure}`);
    return 1;
  }
  console.log(
    '\nexactly once: every logical request ran once and every answer equals its stored outcome',
  );
  return 0;
});
