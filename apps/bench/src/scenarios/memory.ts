import { fileURLToPath } from 'node:url';
import { startChild } from '../lib/child.js';
import { runLoad } from '../lib/loadgen.js';
import { required } from '../lib/required.js';
import { slope } from '../lib/stats.js';
import { formatCount, formatMiB, verdictAtMost } from '../lib/table.js';
import { judged, type RunContext } from './RunContext.js';

interface MemorySample {
  rss: number;
  heapUsed: number;
}

const BODY = JSON.stringify({ json: { sku: 'tea', quantity: 1, ref: 'memory' } });

/**
 * Memory: a fresh server process takes 10k warm-up requests, then 100k (lease, transaction,
 * plain and replays in turn) in ten chunks; after each chunk it runs a full GC and reports
 * its RSS and heap.
 */
export async function memory(context: RunContext): Promise<void> {
  const total = context.quick ? 4_000 : 100_000;
  const chunks = 10;
  const server = await startChild(
    fileURLToPath(new URL('../server/benchServer.ts', import.meta.url)),
    {
      env: { DATABASE_URL: context.databaseUrl, POOL_MAX: '10' },
      nodeFlags: ['--expose-gc', ...context.nodeFlags('memory-server')],
    },
  );
  try {
    const url = `http://127.0.0.1:${String(server.ready.port)}`;
    const runId = Math.random().toString(36).slice(2, 8);
    const replayKeys = Array.from({ length: 100 }, (_, index) => `${runId}-seed-${index}`);
    // Complete the keys that the replays will hit.
    await runLoad({
      url,
      body: BODY,
      connections: 4,
      amount: replayKeys.length,
      targets: [{ path: '/lease', keyOf: (index) => replayKeys[index] }],
    });

    const mix = (tag: string) => [
      { path: '/lease', keyOf: (index: number) => `${runId}-L${tag}-${index}` },
      { path: '/transaction', keyOf: (index: number) => `${runId}-T${tag}-${index}` },
      { path: '/plain', keyOf: () => undefined },
      { path: '/lease', keyOf: (index: number) => replayKeys[index % replayKeys.length] },
    ];
    let failed = 0;
    // Warm-up (JIT code, pools, caches), not measured.
    const warmUp = await runLoad({
      url,
      body: BODY,
      connections: 16,
      amount: total / chunks,
      targets: mix('w'),
    });
    failed += warmUp.non2xx + warmUp.errors + warmUp.timeouts;
    const samples: MemorySample[] = [await server.request<MemorySample>('memory')];
    for (let chunk = 0; chunk < chunks; chunk++) {
      const result = await runLoad({
        url,
        body: BODY,
        connections: 16,
        amount: total / chunks,
        targets: mix(String(chunk)),
      });
      failed += result.non2xx + result.errors + result.timeouts;
      samples.push(await server.request<MemorySample>('memory'));
    }
    if (failed > 0) context.fail(`memory: ${failed} requests failed`);
    context.log(
      `memory: RSS / heap after GC, every ${formatCount(total / chunks)} requests: ${samples.map((sample) => `${formatMiB(sample.rss)} / ${formatMiB(sample.heapUsed)}`).join(', ')}`,
    );

    // Flat = the least-squares trend over the 100k requests adds at most 10 % to the
    // warmed-up baseline. (Single samples of RSS jump by tens of MiB as V8 and malloc grow
    // and return arenas; a leak shows as a steady slope.)
    const first = required(samples[0], 'the first memory sample');
    const last = required(samples.at(-1), 'the last memory sample');
    const trend = (values: number[]) => slope(values) * (values.length - 1);
    const rssTrend = trend(samples.map((sample) => sample.rss));
    const heapTrend = trend(samples.map((sample) => sample.heapUsed));
    const rssShare = rssTrend / first.rss;
    const heapShare = heapTrend / first.heapUsed;
    const percent = (share: number) => `${share >= 0 ? '+' : ''}${(share * 100).toFixed(1)} %`;
    context.report({
      scenario: `memory (server, ${formatCount(total)} requests)`,
      variant: 'RSS after GC: warm → last',
      result: `${formatMiB(first.rss)} → ${formatMiB(last.rss)}`,
      ratio: percent(rssShare),
      target: 'flat: trend ≤ +10 %',
      verdict: judged(context, verdictAtMost(Math.max(rssShare, heapShare), 0.1)),
      note: `trend over the run; heap ${formatMiB(first.heapUsed)} → ${formatMiB(last.heapUsed)} (trend ${percent(heapShare)})`,
    });
  } finally {
    await server.stop();
  }
}
