import { type LoadResult, runLoad } from '../lib/loadgen.js';
import { required } from '../lib/required.js';
import { median, perRound } from '../lib/stats.js';
import { formatMs, formatRate, formatRatio, verdictAtLeast } from '../lib/table.js';
import { judged, type RunContext } from './RunContext.js';

type Mode =
  | 'plain'
  | 'plainTx'
  | 'leaseFloor'
  | 'txFloor'
  | 'lease'
  | 'transaction'
  | 'replayLease'
  | 'replayTransaction';

const LABELS: Record<Mode, string> = {
  plain: 'plain (no idem)',
  plainTx: 'plainTx (no idem, in a transaction)',
  leaseFloor: "lease mode's floor: plain + claim + completion, raw SQL",
  txFloor: "transaction mode's floor: read, then claim + INSERT + completion in a tx, raw SQL",
  lease: 'lease mode',
  transaction: 'transaction mode',
  replayLease: 'replay (lease)',
  replayTransaction: 'replay (transaction)',
};
/**
 * The baseline each idem variant's ratio is given against, and its target there, if it has
 * one there: a first call is judged against its floor (below), which has the statements it
 * cannot do without; its ratio to plain or plainTx is shown for scale.
 */
const TARGETS: Partial<Record<Mode, { ratio?: number; against: 'plain' | 'plainTx' }>> = {
  lease: { against: 'plain' },
  // A procedure that needs transaction mode already runs its writes in a transaction: the
  // fair baseline is the same INSERT inside a plain `db.transaction`.
  transaction: { against: 'plainTx' },
  replayLease: { ratio: 1.0, against: 'plain' },
  replayTransaction: { ratio: 1.0, against: 'plain' },
};

/** Lease and transaction mode against their floors. */
const FLOOR_TARGET = 0.9;

/** The same body for every request: a replay must carry the payload of the original. */
const BODY = JSON.stringify({ json: { sku: 'tea', quantity: 1, ref: 'http' } });

/**
 * HTTP overhead: the same one-INSERT tRPC mutation over real HTTP, plain (autocommit) vs
 * plainTx (in a transaction) vs the two floors vs lease vs transaction vs replays of
 * completed keys, driven by autocannon at a fixed concurrency. Lease mode's floor sends the
 * two statements lease mode cannot do without (a claim and a completion of the key) as raw
 * prepared SQL around the same INSERT, with no idem code: what any design that claims and
 * completes each request with its own statements costs. Transaction mode's floor reads the
 * key first, then claims it, runs the same INSERT and completes it in one transaction, its
 * statements raw prepared SQL on the transaction's connection. Rounds are interleaved (plain,
 * plainTx, lease mode beside its floor, its replays, transaction mode beside its floor, its
 * replays, then again; each floor first in one round and second in the next) so a change in
 * the machine's load hits every variant alike; each ratio is the median of the per-round
 * ratios to its baseline (transaction mode and its floor to plainTx, everything else to
 * plain), and each mode is judged against its floor too.
 */
export async function httpOverhead(context: RunContext, serverUrl: string): Promise<void> {
  const { quick, sql } = context;
  const connections = quick ? 8 : 16;
  // Five short rounds rather than three long ones: on a shared machine the load changes
  // within seconds, and the median of more per-round ratios is steadier.
  const durationSeconds = quick ? 1 : 5;
  const rounds = quick ? 1 : 5;
  const runId = Math.random().toString(36).slice(2, 8);
  const results: Record<Mode, LoadResult[]> = {
    plain: [],
    plainTx: [],
    leaseFloor: [],
    txFloor: [],
    lease: [],
    transaction: [],
    replayLease: [],
    replayTransaction: [],
  };

  const load = (path: string, seconds: number, keyOf: (index: number) => string | undefined) =>
    runLoad({
      url: serverUrl,
      targets: [{ path, keyOf }],
      body: BODY,
      connections,
      durationSeconds: seconds,
    });

  const check = (mode: Mode, result: LoadResult) => {
    if (result.non2xx + result.errors + result.timeouts > 0) {
      context.fail(
        `HTTP overhead ${mode}: ${result.non2xx} non-2xx answers, ${result.errors} errors, ${result.timeouts} timeouts`,
      );
    }
  };

  if (!quick) {
    context.log('HTTP overhead: warming up');
    await load('/plain', 3, () => undefined);
    await load('/plainTx', 3, () => undefined);
    await load('/leaseFloor', 3, (index) => `${runId}-warm-F-${index}`);
    await load('/txFloor', 3, (index) => `${runId}-warm-X-${index}`);
    await load('/lease', 3, (index) => `${runId}-warm-L-${index}`);
    await load('/transaction', 3, (index) => `${runId}-warm-T-${index}`);
  }

  const ordersCount = async () =>
    Number(required((await sql`select count(*)::int as n from bench_orders`)[0], 'a count').n);

  /** A first call's load under new keys; the prefix of its keys. */
  const fresh = async (mode: Mode, path: string, prefix: string) => {
    const result = await load(path, durationSeconds, (index) => `${prefix}${index}`);
    check(mode, result);
    results[mode].push(result);
  };

  /** Replays of the keys a first call's load completed (`prefix`), which run nothing. */
  const replays = async (mode: Mode, replayMode: Mode, path: string, prefix: string) => {
    // The keys that really completed (the load generator prepares requests it never
    // sends, and the last ones may still have been in flight when it stopped).
    const completed = (
      await sql<{ key: string }[]>`select key from idem_keys
        where status = 'completed' and starts_with(key, ${prefix})`
    ).map((row) => row.key);
    if (completed.length === 0) {
      context.fail(`HTTP overhead ${mode}: no key completed`);
      return;
    }
    // Requests the load generator abandoned at the end still finish on the server: wait
    // until the table stops growing before counting what the replays do.
    let before = await ordersCount();
    for (;;) {
      await new Promise((resolve) => setTimeout(resolve, 300));
      const now = await ordersCount();
      if (now === before) break;
      before = now;
    }
    const replay = await load(
      path,
      durationSeconds,
      (index) => completed[index % completed.length],
    );
    check(replayMode, replay);
    const executed = (await ordersCount()) - before;
    if (executed !== 0) {
      context.fail(`HTTP overhead ${replayMode}: ${executed} replays ran the procedure again`);
    }
    results[replayMode].push(replay);
  };

  for (let round = 0; round < rounds; round++) {
    context.log(`HTTP overhead: round ${round + 1}/${rounds}`);
    const plain = await load('/plain', durationSeconds, () => undefined);
    check('plain', plain);
    results.plain.push(plain);
    const plainTx = await load('/plainTx', durationSeconds, () => undefined);
    check('plainTx', plainTx);
    results.plainTx.push(plainTx);

    // Each mode right beside its floor, the floor first in one round and second in the
    // next: what drifts within a round (the machine's load, the tables growing) then
    // favours neither.
    for (const [mode, floor, replayMode, tag] of [
      ['lease', 'leaseFloor', 'replayLease', 'L'],
      ['transaction', 'txFloor', 'replayTransaction', 'T'],
    ] as const) {
      const pair = [
        () => fresh(floor, `/${floor}`, `${runId}-${tag}F${round}-`),
        () => fresh(mode, `/${mode}`, `${runId}-${tag}${round}-`),
      ];
      for (const run of round % 2 === 0 ? pair : pair.reverse()) await run();
      await replays(mode, replayMode, `/${mode}`, `${runId}-${tag}${round}-`);
    }
  }

  for (const mode of Object.keys(LABELS) as Mode[]) {
    const runs = results[mode];
    const target = TARGETS[mode];
    const baseline = results[target?.against ?? (mode === 'txFloor' ? 'plainTx' : 'plain')];
    const ratio = ratioTo(runs, baseline);
    context.report({
      scenario: `HTTP overhead (${connections} conn)`,
      variant: LABELS[mode],
      result: formatRate(median(runs.map((result) => result.requestsPerSecond)), 'req/s'),
      p50: formatMs(median(runs.map((result) => result.p50))),
      p99: formatMs(median(runs.map((result) => result.p99))),
      ratio: formatRatio(ratio),
      ...(mode === 'plainTx' && { note: 'ratio to plain' }),
      ...(mode === 'leaseFloor' && { note: 'ratio to plain; no idem code' }),
      ...(mode === 'txFloor' && { note: 'ratio to plainTx; no idem code' }),
      ...(target !== undefined &&
        target.ratio === undefined && {
          note: `ratio to ${target.against}; judged against its floor below`,
        }),
      ...(target?.ratio !== undefined && {
        target: `≥ ${target.ratio.toFixed(2)}× ${target.against}`,
        verdict: judged(context, verdictAtLeast(ratio, target.ratio)),
      }),
    });
  }
  // Each mode against its floor: the same request with only the statements it cannot do
  // without, as raw SQL.
  for (const [mode, floor] of [
    ['lease', 'leaseFloor'],
    ['transaction', 'txFloor'],
  ] as const) {
    const ratio = ratioTo(results[mode], results[floor]);
    context.report({
      scenario: `HTTP overhead (${connections} conn)`,
      variant: `${LABELS[mode]} vs its floor`,
      result: formatRate(median(results[mode].map((result) => result.requestsPerSecond)), 'req/s'),
      ratio: formatRatio(ratio),
      target: `≥ ${FLOOR_TARGET.toFixed(2)}× floor`,
      verdict: judged(context, verdictAtLeast(ratio, FLOOR_TARGET)),
      note: `rounds ${perRound(
        results[mode],
        results[floor],
        (result, base) => result.requestsPerSecond / base.requestsPerSecond,
      )
        .map(formatRatio)
        .join(', ')}`,
    });
  }
}

/** The median of the per-round ratios of `runs` to `baseline` (round by round). */
function ratioTo(runs: readonly LoadResult[], baseline: readonly LoadResult[]): number {
  return median(
    perRound(runs, baseline, (result, base) => result.requestsPerSecond / base.requestsPerSecond),
  );
}
