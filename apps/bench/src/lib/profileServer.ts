import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { mainProfileIn, type ProfileSummary, summarizeProfile } from '../tools/summarizeProfile.js';
import { startChild } from './child.js';
import { runLoad } from './loadgen.js';

export type ProfiledMode =
  | 'plain'
  | 'plainTx'
  | 'leaseFloor'
  | 'txFloor'
  | 'lease'
  | 'transaction'
  | 'replay';

export interface ServerProfile {
  mode: ProfiledMode;
  requestsPerSecond: number;
  p50: number;
  p99: number;
  requests: number;
  /**
   * The server process's CPU time (user + system, `process.cpuUsage()`) per request in the
   * measured window, µs: what the OS charged it, so time it spent descheduled on a busy
   * machine does not count.
   */
  cpuPerRequestUs: number;
  /**
   * The profile's busy time per request in the measured window, µs: wall time the main
   * thread was not idle, which on a loaded machine includes time it waited for a core.
   */
  busyPerRequestUs: number;
  summary: ProfileSummary;
}

/** Functions whose inclusive time the summary reports. */
export const PROFILED_FUNCTIONS = [
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

/** What the bench server's `mark` request answers. */
interface Mark {
  monotonicUs: number;
  cpuUs: number;
}

const SERVER = fileURLToPath(new URL('../server/benchServer.ts', import.meta.url));
const BODY = JSON.stringify({ json: { sku: 'tea', quantity: 1, ref: 'profile' } });

/**
 * One HTTP variant of the benchmark against a bench server started with `--cpu-prof`
 * (16 connections, a 2 s warm-up that is not counted), then that server's CPU time per
 * request, from the profile's samples in the measured window only.
 */
export async function profileServer(options: {
  databaseUrl: string;
  mode: ProfiledMode;
  seconds: number;
  /** Tells keys of different calls apart when several profiles share a database. */
  runId?: string;
}): Promise<ServerProfile> {
  const { mode, seconds } = options;
  const runId = options.runId ?? Math.random().toString(36).slice(2, 8);
  const env = { DATABASE_URL: options.databaseUrl, POOL_MAX: '10' };
  const path = mode === 'replay' ? '/lease' : `/${mode}`;
  const keys = Array.from({ length: 1_000 }, (_, index) => `profile-${runId}-${index}`);
  if (mode === 'replay') {
    // Completes the keys the replays will hit, on a server that is not profiled.
    const seeder = await startChild(SERVER, { env });
    try {
      await runLoad({
        url: `http://127.0.0.1:${String(seeder.ready.port)}`,
        body: BODY,
        connections: 8,
        amount: keys.length,
        targets: [{ path, keyOf: (index) => keys[index] }],
      });
    } finally {
      await seeder.stop();
    }
  }
  const profileDir = mkdtempSync(join(tmpdir(), 'idem-profile-'));
  try {
    const server = await startChild(SERVER, {
      env,
      nodeFlags: ['--cpu-prof', `--cpu-prof-dir=${profileDir}`],
    });
    const url = `http://127.0.0.1:${String(server.ready.port)}`;
    let counter = 0;
    const keyOf = (index: number) =>
      mode === 'plain' || mode === 'plainTx'
        ? undefined
        : mode === 'replay'
          ? keys[index % keys.length]
          : `p-${runId}-${counter++}`;
    let result: Awaited<ReturnType<typeof runLoad>>;
    let window: { fromUs: number; toUs: number };
    let cpuUs: number;
    try {
      await runLoad({
        url,
        body: BODY,
        connections: 16,
        durationSeconds: 2,
        targets: [{ path, keyOf }],
      });
      const from = await server.request<Mark>('mark');
      result = await runLoad({
        url,
        body: BODY,
        connections: 16,
        durationSeconds: seconds,
        targets: [{ path, keyOf }],
      });
      const to = await server.request<Mark>('mark');
      window = { fromUs: from.monotonicUs, toUs: to.monotonicUs };
      cpuUs = to.cpuUs - from.cpuUs;
    } finally {
      // The server writes its profile as it exits, which takes seconds on a loaded machine.
      await server.stop(120_000);
    }
    if (result.non2xx + result.errors + result.timeouts > 0) {
      throw new Error(
        `profile ${mode}: ${result.non2xx} non-2xx answers, ${result.errors} errors, ${result.timeouts} timeouts`,
      );
    }
    const file = mainProfileIn(profileDir);
    const summary = summarizeProfile(
      JSON.parse(readFileSync(file, 'utf8')),
      PROFILED_FUNCTIONS,
      window,
    );
    const requests = result.requestsPerSecond * result.durationSeconds;
    const busyMs = summary.byPackage
      .filter(([name]) => !name.includes('(idle)'))
      .reduce((sum, [, ms]) => sum + ms, 0);
    return {
      mode,
      requestsPerSecond: result.requestsPerSecond,
      p50: result.p50,
      p99: result.p99,
      requests,
      cpuPerRequestUs: cpuUs / requests,
      busyPerRequestUs: (busyMs / requests) * 1000,
      summary,
    };
  } finally {
    if (process.env.KEEP_PROFILE) console.log(`profile kept in ${profileDir}`);
    else rmSync(profileDir, { recursive: true, force: true });
  }
}
