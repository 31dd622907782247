/**
 * The HTTP server of the benchmarks, run as its own process (the load generator lives in
 * the parent): `DATABASE_URL`, `POOL_MAX`. Replies to `memory` requests with its memory
 * after a full GC (start it with `--expose-gc`).
 */
import { createBenchRouter } from './benchRouter.js';
import { serveTrpcChild } from './serveTrpc.js';

await serveTrpcChild({
  router: createBenchRouter,
  pool: { max: Number(process.env.POOL_MAX ?? 10) },
  endTimeoutS: 5,
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
