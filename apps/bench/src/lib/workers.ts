import { nowMs } from './stats.js';

export interface WorkersResult {
  /** Operations completed. */
  count: number;
  /** Wall time in ms. */
  elapsedMs: number;
  /** Latency of every operation, ms. */
  latencies: number[];
  perSecond: number;
}

/**
 * `concurrency` loops that each run `operation(n)` back to back (a closed loop, like
 * pgbench's clients) until `durationMs` has passed or `shouldStop()` says so; records the
 * latency of each operation. An operation that throws fails the whole run.
 */
export async function runWorkers(
  concurrency: number,
  durationMs: number,
  operation: (index: number) => Promise<void>,
  shouldStop: () => boolean = () => false,
): Promise<WorkersResult> {
  const latencies: number[] = [];
  let next = 0;
  const started = nowMs();
  const deadline = started + durationMs;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (nowMs() < deadline && !shouldStop()) {
        const begun = nowMs();
        await operation(next++);
        latencies.push(nowMs() - begun);
      }
    }),
  );
  const elapsedMs = nowMs() - started;
  return {
    count: latencies.length,
    elapsedMs,
    latencies,
    perSecond: (latencies.length / elapsedMs) * 1000,
  };
}

/**
 * Calls `call(0)` … `call(count - 1)`, `concurrency` at a time (each index once); answers
 * calls per second.
 */
export async function callsPerSecond(
  concurrency: number,
  count: number,
  call: (index: number) => Promise<void>,
): Promise<number> {
  let next = 0;
  const started = nowMs();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) await call(next++);
    }),
  );
  return (count / (nowMs() - started)) * 1000;
}
