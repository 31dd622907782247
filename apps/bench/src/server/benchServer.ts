/**
 * The HTTP server of the benchmarks, run as its own process (the load generator lives in
 * the parent): `DATABASE_URL`, `POOL_MAX`. Replies to `memory` requests with its memory
 * after a full GC (start it with `--expose-gc`).
 */
import { drizzle } from 'drizzle-orm/postgres-js';
import postgres from 'postgres';
import { serveParent } from '../lib/child.js';
import { quiet, requiredEnv } from '../lib/config.js';
import { createBenchRouter } from './benchRouter.js';
import { serveTrpc } from './serveTrpc.js';

const client = postgres(requiredEnv('DATABASE_URL'), {
  ...quiet,
  max: Number(process.env.POOL_MAX ?? 10),
});
const db = drizzle(client);
let close: (() => Promise<void>) | undefined;

const parent = serveParent({
  onStop: async () => {
    await close?.();
    await client.end({ timeout: 5 });
  },
  requests: {
    /**
     * The monotonic clock in µs (the one CPU profiles time their samples by) and the CPU
     * time this process has used so far (user + system, every thread), in µs.
     */
    mark: () => {
      const cpu = process.cpuUsage();
      return { monotonicUs: Number(process.hrtime.bigint() / 1000n), cpuUs: cpu.user + cpu.system };
    },
    memory: () => {
      (globalThis as { gc?: () => void }).gc?.();
      const usage = process.memoryUsage();
      return { rss: usage.rss, heapUsed: usage.heapUsed, external: usage.external };
    },
  },
});

try {
  const served = await serveTrpc(createBenchRouter(db, client), Number(process.env.PORT ?? 0));
  close = served.close;
  parent.ready({ port: served.port, pid: process.pid });
} catch (error) {
  parent.failed(error);
}
