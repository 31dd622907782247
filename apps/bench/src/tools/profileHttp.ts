/**
 * `tsx src/tools/profileHttp.ts <plain|plainTx|leaseFloor|txFloor|lease|transaction|replay> [seconds]`: one
 * HTTP variant of the benchmark against a server started with `--cpu-prof`, then where that
 * server's CPU time went. The evidence behind a missed HTTP target. `KEEP_PROFILE=1` keeps
 * the profile's folder (its path is printed) for a closer look, e.g. two variants' profiles
 * compared function by function.
 */
import { migrate } from '@idem/server/postgres';
import { drizzle } from 'drizzle-orm/postgres-js';
import postgres from 'postgres';
import { onCleanup, runMain } from '../lib/cleanup.js';
import { quiet } from '../lib/config.js';
import { type ProfiledMode, profileServer } from '../lib/profileServer.js';
import { createScratchDatabase } from '../lib/scratchDatabase.js';
import { CREATE_BENCH_TABLES } from '../server/schema.js';
import { formatSummary } from './summarizeProfile.js';

runMain(async () => {
  const mode = (process.argv[2] ?? 'lease') as ProfiledMode;
  const seconds = Number(process.argv[3] ?? 10);
  const scratch = await createScratchDatabase('idem_profile');
  const sql = postgres(scratch.url, { ...quiet, max: 2 });
  onCleanup('close', () => sql.end({ timeout: 2 }));
  await migrate(drizzle(sql));
  await sql.unsafe(CREATE_BENCH_TABLES);
  const profile = await profileServer({ databaseUrl: scratch.url, mode, seconds });
  console.log(
    `${mode}: ${profile.requestsPerSecond.toFixed(0)} req/s, p50 ${profile.p50} ms, p99 ${profile.p99} ms`,
  );
  console.log(formatSummary(profile.summary, 25));
  const perRequest = (ms: number) =>
    `${((ms / profile.requests) * 1000).toFixed(0).padStart(4)} µs`;
  console.log(`-- server CPU per request (${Math.round(profile.requests)} requests)`);
  console.log(`${profile.cpuPerRequestUs.toFixed(0).padStart(4)} µs  CPU (process.cpuUsage)`);
  console.log(
    `${profile.busyPerRequestUs.toFixed(0).padStart(4)} µs  busy in the profile, of which:`,
  );
  const busy = profile.summary.byPackage.filter(([name]) => !name.includes('(idle)'));
  for (const entry of busy.slice(0, 12)) console.log(`${perRequest(entry[1])}  ${entry[0]}`);
  return 0;
});
