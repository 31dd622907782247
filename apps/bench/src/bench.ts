/**
 * `pnpm bench [--quick] [--only a,b]`: every scenario in one run on a scratch database,
 * then ONE table of ratios. Exits non-zero when a scenario is broken (a duplicate, a lost
 * event, an error answer); a missed performance target is reported, not fatal.
 */
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { migrate } from '@idem/server/postgres';
import { drizzle } from 'drizzle-orm/postgres-js';
import postgres from 'postgres';
import { startChild } from './lib/child.js';
import { onCleanup, runMain } from './lib/cleanup.js';
import { quiet } from './lib/config.js';
import { currentLoad, machineInfo } from './lib/machine.js';
import { createScratchDatabase } from './lib/scratchDatabase.js';
import { formatTable, type ResultRow } from './lib/table.js';
import { duplicateStorm } from './scenarios/duplicateStorm.js';
import { engineVsFloor } from './scenarios/engineVsFloor.js';
import { growth } from './scenarios/growth.js';
import { httpOverhead } from './scenarios/httpOverhead.js';
import { memory } from './scenarios/memory.js';
import { outbox } from './scenarios/outbox.js';
import { pgEngine } from './scenarios/pgEngine.js';
import type { RunContext } from './scenarios/RunContext.js';
import { redisPeers } from './scenarios/redisPeers.js';
import { redisStore } from './scenarios/redisStore.js';
import { roundTrips } from './scenarios/roundTrips.js';
import { serverCpu } from './scenarios/serverCpu.js';
import { storeVsFloor } from './scenarios/storeVsFloor.js';
import { CREATE_BENCH_TABLES } from './server/schema.js';

const SCENARIOS = [
  'trips',
  'http',
  'storm',
  'store',
  'redis',
  'redis-peers',
  'engine',
  'pgengine',
  'cpu',
  'outbox',
  'growth',
  'memory',
] as const;
type ScenarioName = (typeof SCENARIOS)[number];

function parseArgs(argv: readonly string[]) {
  const quick = argv.includes('--quick');
  const onlyIndex = argv.indexOf('--only');
  const only =
    onlyIndex >= 0
      ? (argv[onlyIndex + 1] ?? '')
          .split(',')
          .filter((name): name is ScenarioName => (SCENARIOS as readonly string[]).includes(name))
      : [...SCENARIOS];
  return {
    quick,
    only: new Set<ScenarioName>(only),
    markdown: argv.includes('--markdown'),
    profile: argv.includes('--profile'),
  };
}

runMain(async () => {
  const args = parseArgs(process.argv.slice(2));
  const startedAt = new Date();
  const loadBefore = currentLoad();
  const scratch = await createScratchDatabase();
  const client = postgres(scratch.url, { ...quiet, max: 4 });
  onCleanup('close the bench client', () => client.end({ timeout: 5 }));
  await migrate(drizzle(client));
  await client.unsafe(CREATE_BENCH_TABLES);

  const profileDir = args.profile
    ? fileURLToPath(
        new URL(`../profiles/${startedAt.toISOString().replaceAll(':', '-')}`, import.meta.url),
      )
    : undefined;
  const rows: ResultRow[] = [];
  const failures: string[] = [];
  const context: RunContext = {
    quick: args.quick,
    databaseUrl: scratch.url,
    sql: client,
    report: (row) => rows.push(row),
    fail: (message) => {
      failures.push(message);
      console.error(`FAILED: ${message}`);
    },
    nodeFlags: (name) =>
      profileDir ? ['--cpu-prof', `--cpu-prof-dir=${join(profileDir, name)}`] : [],
    log: (message) =>
      console.error(
        `[bench ${((Date.now() - startedAt.getTime()) / 1000).toFixed(0)}s] ${message}`,
      ),
  };

  // A scenario that throws is a broken scenario: reported, and the others still run.
  const run = async (name: ScenarioName, scenario: () => Promise<void>) => {
    if (!args.only.has(name)) return;
    try {
      await scenario();
    } catch (error) {
      context.fail(
        `${name}: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`,
      );
    }
  };

  await run('trips', () => roundTrips(context));
  if (args.only.has('http') || args.only.has('storm')) {
    const server = await startChild(
      fileURLToPath(new URL('./server/benchServer.ts', import.meta.url)),
      {
        env: { DATABASE_URL: scratch.url, POOL_MAX: '10' },
        nodeFlags: context.nodeFlags('http-server'),
      },
    );
    const url = `http://127.0.0.1:${String(server.ready.port)}`;
    await run('http', () => httpOverhead(context, url));
    await run('storm', () => duplicateStorm(context, url));
    await server.stop();
  }
  await run('store', () => storeVsFloor(context));
  await run('redis', () => redisStore(context));
  await run('redis-peers', () => redisPeers(context));
  await run('engine', () => engineVsFloor(context));
  await run('pgengine', () => pgEngine(context));
  await run('cpu', () => serverCpu(context));
  await run('outbox', () => outbox(context));
  await run('growth', () => growth(context));
  await run('memory', () => memory(context));

  const machine = await machineInfo(scratch.url);
  const loadAfter = currentLoad();
  console.log('');
  console.log(
    `idem bench${args.quick ? ' --quick (smoke: checks that every scenario works, not how fast)' : ''} — ${startedAt.toISOString()}`,
  );
  console.log(
    `machine: ${machine.cores} × ${machine.cpuModel}, ${machine.memoryGiB} GiB, Node ${machine.node}, PostgreSQL ${machine.postgres}, ${machine.nats}`,
  );
  console.log(`load average (1/5/15 min): before ${loadBefore}, after ${loadAfter}`);
  console.log(`idem: ${measuredBuild()}`);
  console.log('');
  console.log(formatTable(rows));
  if (args.markdown) console.log(`\n${formatTable(rows, { markdown: true })}`);
  console.log('');
  if (failures.length > 0) {
    console.log(`${failures.length} scenario check(s) FAILED:`);
    for (const failure of failures) console.log(`  - ${failure}`);
    return 1;
  }
  if (profileDir) console.log(`CPU profiles of the child processes: ${profileDir}`);
  console.log('every scenario check passed');
  return 0;
});

/**
 * Which build of idem this run measures. `pnpm bench` builds the packages and measures what
 * they publish (tsc's output); run under the `@idem/source` condition, tsx compiles the
 * sources with every named function wrapped in a `__name` call, work the published build
 * does not do (about 13,000 instructions per first call and replay of the engine on
 * Postgres).
 */
function measuredBuild(): string {
  return import.meta.resolve('@idem/server').includes('/src/')
    ? 'its sources (the @idem/source condition, compiled by tsx: not what is published)'
    : 'the built packages, as published';
}
