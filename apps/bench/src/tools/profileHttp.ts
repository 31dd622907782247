/**
 * `tsx src/tools/profileHttp.ts <plain|lease|transaction|replay> [seconds]`: one HTTP
 * variant of the benchmark against a server started with `--cpu-prof`, then where that
 * server's CPU time went. The evidence behind a missed HTTP target.
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { migrate } from '@idem/server';
import { drizzle } from 'drizzle-orm/postgres-js';
import postgres from 'postgres';
import { startChild } from '../lib/child.js';
import { onCleanup, runMain } from '../lib/cleanup.js';
import { quiet } from '../lib/config.js';
import { runLoad } from '../lib/loadgen.js';
import { createScratchDatabase } from '../lib/scratchDatabase.js';
import { CREATE_BENCH_TABLES } from '../server/schema.js';
import { formatSummary, mainProfileIn, summarizeProfile } from './summarizeProfile.js';

const FUNCTIONS = [
  'idempotent',
  'middleware',
  'runLease',
  'runInTransaction',
  'fingerprintWithin',
  'canonicalJson',
  'sha256Hex',
  'claim',
  'complete',
  'execute',
  'sqlToQuery',
  'nextWrite',
  'parse',
  'serialize',
  'deserialize',
  'resolveResponse',
  'createContext',
];

runMain(async () => {
  const mode = process.argv[2] ?? 'lease';
  const seconds = Number(process.argv[3] ?? 10);
  const scratch = await createScratchDatabase('idem_profile');
  const sql = postgres(scratch.url, { ...quiet, max: 2 });
  onCleanup('close', () => sql.end({ timeout: 2 }));
  await migrate(drizzle(sql));
  await sql.unsafe(CREATE_BENCH_TABLES);
  const profileDir = mkdtempSync(join(tmpdir(), 'idem-profile-'));
  const serverModule = fileURLToPath(new URL('../server/benchServer.ts', import.meta.url));
  const env = { DATABASE_URL: scratch.url, POOL_MAX: '10' };
  const body = JSON.stringify({ json: { sku: 'tea', quantity: 1, ref: 'profile' } });
  const path = mode === 'replay' ? '/lease' : `/${mode}`;
  const keys = Array.from({ length: 1_000 }, (_, index) => `profile-${index}`);
  if (mode === 'replay') {
    // Completes the keys the replays will hit, on a server that is not profiled.
    const seeder = await startChild(serverModule, { env });
    await runLoad({
      url: `http://127.0.0.1:${String(seeder.ready.port)}`,
      body,
      connections: 8,
      amount: keys.length,
      targets: [{ path, keyOf: (index) => keys[index] }],
    });
    await seeder.stop();
  }
  const server = await startChild(serverModule, {
    env,
    nodeFlags: ['--cpu-prof', `--cpu-prof-dir=${profileDir}`],
  });
  const url = `http://127.0.0.1:${String(server.ready.port)}`;
  let counter = 0;
  const keyOf = (index: number) =>
    mode === 'plain' ? undefined : mode === 'replay' ? keys[index % keys.length] : `p-${counter++}`;
  // Warm-up (JIT), then the measured window: only its samples count.
  await runLoad({ url, body, connections: 16, durationSeconds: 2, targets: [{ path, keyOf }] });
  const from = await server.request<{ monotonicUs: number }>('mark');
  const result = await runLoad({
    url,
    body,
    connections: 16,
    durationSeconds: seconds,
    targets: [{ path, keyOf }],
  });
  const to = await server.request<{ monotonicUs: number }>('mark');
  await server.stop();
  console.log(
    `${mode}: ${result.requestsPerSecond.toFixed(0)} req/s, p50 ${result.p50} ms, p99 ${result.p99} ms`,
  );
  const file = mainProfileIn(profileDir);
  const summary = summarizeProfile(JSON.parse(readFileSync(file, 'utf8')), FUNCTIONS, {
    fromUs: from.monotonicUs,
    toUs: to.monotonicUs,
  });
  console.log(formatSummary(summary, 25));
  // Server CPU per request, in the measured window only.
  const requests = result.requestsPerSecond * result.durationSeconds;
  const busy = summary.byPackage.filter(([name]) => !name.includes('(idle)'));
  const perRequest = (ms: number) => `${((ms / requests) * 1000).toFixed(0).padStart(4)} µs`;
  console.log(`-- server CPU per request (${Math.round(requests)} requests)`);
  console.log(`${perRequest(busy.reduce((sum, [, ms]) => sum + ms, 0))}  total`);
  for (const entry of busy.slice(0, 12)) console.log(`${perRequest(entry[1])}  ${entry[0]}`);
  return 0;
});
