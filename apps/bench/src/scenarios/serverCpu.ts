import { profileServer, type ServerProfile } from '../lib/profileServer.js';
import { median, perRound } from '../lib/stats.js';
import { formatRate, verdictAtMost } from '../lib/table.js';
import { judged, type RunContext } from './RunContext.js';

const TARGET_US = 200;

type Variant = 'plain' | 'leaseFloor' | 'lease';

/**
 * Server CPU per request: plain vs lease mode's floor vs lease mode, interleaved rounds, and
 * what idem adds to a lease-mode request, beside what the floor's two statements alone add
 * (a claim and a completion as raw prepared SQL, no idem code: the least any design that
 * claims and completes each request with statements of its own can add). The CPU is what
 * the OS charged the bench server's process in the measured window (`process.cpuUsage()`,
 * user + system); the server runs with `--cpu-prof` so that the same window's profile says
 * where it went, and the profile's busy time (wall time the main thread was not idle, which
 * also counts time spent waiting for a core on a loaded machine) is shown beside it.
 * Throughput follows the server's CPU per request, so this is where the HTTP ratios come
 * from.
 */
export async function serverCpu(context: RunContext): Promise<void> {
  const seconds = context.quick ? 2 : 6;
  const rounds = context.quick ? 1 : 2;
  const runs: Record<Variant, ServerProfile[]> = { plain: [], leaseFloor: [], lease: [] };
  for (let round = 0; round < rounds; round++) {
    for (const mode of ['plain', 'leaseFloor', 'lease'] as const) {
      context.log(`server CPU: ${mode}, round ${round + 1}/${rounds}`);
      runs[mode].push(await profileServer({ databaseUrl: context.databaseUrl, mode, seconds }));
    }
  }
  type Measure = 'cpuPerRequestUs' | 'busyPerRequestUs' | 'requestsPerSecond';
  const typical = (mode: Variant, measure: Measure) =>
    median(runs[mode].map((profile) => profile[measure]));
  const us = (mode: Variant) => typical(mode, 'cpuPerRequestUs');
  const busy = (mode: Variant) => `busy ${typical(mode, 'busyPerRequestUs').toFixed(0)} µs`;
  const rate = (mode: Variant) => formatRate(typical(mode, 'requestsPerSecond'), 'req/s');
  const scenario = 'server CPU per request (16 conn, profiled)';
  context.report({
    scenario,
    variant: 'plain (no idem)',
    result: `${us('plain').toFixed(0)} µs`,
    note: `${rate('plain')}, ${busy('plain')}`,
  });
  context.report({
    scenario,
    variant: "lease mode's floor (plain + claim + completion, raw SQL)",
    result: `${us('leaseFloor').toFixed(0)} µs`,
    note: `${rate('leaseFloor')}, ${busy('leaseFloor')}`,
  });
  context.report({
    scenario,
    variant: 'lease mode',
    result: `${us('lease').toFixed(0)} µs`,
    note: `${rate('lease')}, ${busy('lease')}`,
  });
  const addedBy = (
    mode: 'leaseFloor' | 'lease',
    measure: 'cpuPerRequestUs' | 'busyPerRequestUs' = 'cpuPerRequestUs',
  ) =>
    median(perRound(runs[mode], runs.plain, (profile, plain) => profile[measure] - plain[measure]));
  context.report({
    scenario,
    variant: "server CPU added per request by the floor's two statements",
    result: `${addedBy('leaseFloor').toFixed(0)} µs`,
    note: 'no idem code: the least two statements of its own add',
  });
  const added = addedBy('lease');
  context.report({
    scenario,
    variant: 'server CPU added per request, lease mode',
    result: `${added.toFixed(0)} µs`,
    target: `≤ ${TARGET_US} µs`,
    verdict: judged(context, verdictAtMost(added, TARGET_US)),
    note: `busy time added ${addedBy('lease', 'busyPerRequestUs').toFixed(0)} µs`,
  });
}
