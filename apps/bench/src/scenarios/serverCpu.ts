import { profileServer, type ServerProfile } from '../lib/profileServer.js';
import { median } from '../lib/stats.js';
import { formatRate, verdictAtMost } from '../lib/table.js';
import { judged, type RunContext } from './RunContext.js';

const TARGET_US = 200;

/**
 * Server CPU per request, from CPU profiles of the bench server (`--cpu-prof`, samples of
 * the measured window only): plain vs lease mode, interleaved rounds, and what idem adds to
 * a lease-mode request. Throughput follows the server's CPU per request, so this is where
 * the HTTP ratios come from.
 */
export async function serverCpu(context: RunContext): Promise<void> {
  const seconds = context.quick ? 2 : 6;
  const rounds = context.quick ? 1 : 2;
  const runs: Record<'plain' | 'lease', ServerProfile[]> = { plain: [], lease: [] };
  for (let round = 0; round < rounds; round++) {
    for (const mode of ['plain', 'lease'] as const) {
      context.log(`server CPU: ${mode}, round ${round + 1}/${rounds}`);
      runs[mode].push(await profileServer({ databaseUrl: context.databaseUrl, mode, seconds }));
    }
  }
  const us = (mode: 'plain' | 'lease') =>
    median(runs[mode].map((profile) => profile.cpuPerRequestUs));
  const rate = (mode: 'plain' | 'lease') =>
    formatRate(median(runs[mode].map((profile) => profile.requestsPerSecond)), 'req/s');
  const scenario = 'server CPU per request (16 conn, profiled)';
  context.report({
    scenario,
    variant: 'plain (no idem)',
    result: `${us('plain').toFixed(0)} µs`,
    note: rate('plain'),
  });
  context.report({
    scenario,
    variant: 'lease mode',
    result: `${us('lease').toFixed(0)} µs`,
    note: rate('lease'),
  });
  const added = median(
    runs.lease.map(
      (profile, round) => profile.cpuPerRequestUs - runs.plain[round]!.cpuPerRequestUs,
    ),
  );
  context.report({
    scenario,
    variant: 'server CPU added per request, lease mode',
    result: `${added.toFixed(0)} µs`,
    target: `≤ ${TARGET_US} µs`,
    verdict: judged(context, verdictAtMost(added, TARGET_US)),
  });
}
