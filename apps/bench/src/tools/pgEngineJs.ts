/**
 * `tsx src/tools/pgEngineJs.ts [calls=200000] [phases=first,replay]`: what the engine on
 * Postgres (`createIdempotency` + `drizzleStore` on postgres-js) costs in JavaScript alone,
 * without the database. Each statement of each phase is answered once by Postgres (a
 * scratch database, 16 calls in flight as below, so the store gathers calls as it will),
 * and those answers are then handed back at once by a stand-in for the postgres-js client,
 * made over for each call's scope and key (see `answerFrom`), so every call runs idem's and
 * Drizzle's code and none of the network's, the driver's or the server's: µs per call (16
 * in flight) and this process's CPU per call. Steadier than any timing against the
 * database; run it under `node --cpu-prof --import tsx` to see where the time goes.
 * `ALLOC=1` also prints what each phase allocates per call, by function (V8's sampling heap
 * profiler, objects collected since included): garbage the collector must then sweep while
 * the calls wait. The profiler slows the calls: compare timings without it.
 */
import { randomUUID } from 'node:crypto';
import type { HeapProfiler } from 'node:inspector';
import { Session } from 'node:inspector/promises';
import { createIdempotency } from '@idem/core';
import { drizzleStore } from '@idem/server/postgres';
import { drizzle } from 'drizzle-orm/postgres-js';
import type postgres from 'postgres';
import { runMain } from '../lib/cleanup.js';
import { measuredDatabase } from '../lib/keysCpu.js';
import { callsPerSecond } from '../lib/workers.js';

const SCOPE = 'tenant:bench/js';
const INPUT = { path: 'orders.create', input: { sku: 'tea', quantity: 1, ref: 'js' } };
const RESULT = { orderId: 1, sku: 'tea', quantity: 1 };
const IN_FLIGHT = 16;
/** Every allocation sampled, the garbage collected during the phase too (not in Node's types). */
const SAMPLING = {
  samplingInterval: 512,
  includeObjectsCollectedByMajorGC: true,
  includeObjectsCollectedByMinorGC: true,
} as HeapProfiler.StartSamplingParameterType;

type Phase = 'first' | 'replay';
type Rows = unknown[][];
/** The part of a postgres-js query idem uses: awaited, or its rows as arrays. */
type Query = Promise<unknown[]> & { values(): Promise<Rows> };
type Unsafe = (text: string, params: unknown[], options: { prepare: boolean }) => Query;

/** What Postgres answered to one statement text, once: the call's scope and key, its rows. */
interface Sample {
  scope: unknown;
  key: unknown;
  rows: Rows;
}

/**
 * The scope and key of each call a statement carries: a statement of several calls
 * (gathered) binds them as arrays, `[scopes, keys, …]` (a completion after its status and
 * lease, `[status, lease, scopes, keys, …]`); a statement of one call as its first two values.
 */
function callsOf(params: readonly unknown[]): { scope: unknown; key: unknown }[] {
  const arrays = params.filter(Array.isArray) as unknown[][];
  if (arrays.length >= 2) {
    const [scopes, keys] = arrays as [unknown[], unknown[]];
    return scopes.map((scope, index) => ({ scope, key: keys[index] }));
  }
  return [{ scope: params[0], key: params[1] }];
}

/**
 * The answer Postgres gave `sample`, made over for the calls of `params`: the sample's
 * first row once per call, its scope and key replaced by the call's, and a leading place
 * (a gathered statement's 1-based position of the call) set to the call's. A sample with
 * no rows answers no rows (a claim that found its key, an insert that inserted nothing).
 */
function answerFrom(sample: Sample, params: readonly unknown[]): Rows {
  const [template] = sample.rows;
  if (template === undefined) return [];
  const gathered = params.some(Array.isArray);
  return callsOf(params).map(({ scope, key }, index) =>
    template.map((value, column) => {
      if (gathered && column === 0 && typeof value === 'string' && /^\d+$/.test(value)) {
        return String(index + 1);
      }
      if (value === sample.key) return key;
      if (value === sample.scope) return scope;
      return value;
    }),
  );
}

runMain(async () => {
  const calls = Number(process.argv[2] ?? 200_000);
  const phases = (process.argv[3] ?? 'first,replay').split(',') as Phase[];
  const { client } = await measuredDatabase('idem_js', 4);

  // Postgres answers each statement of each phase once, 16 calls in flight on a store of
  // its own per phase (as below): new keys, then the same keys again.
  const samples: Record<Phase, Map<string, Sample>> = { first: new Map(), replay: new Map() };
  let phase: Phase = 'first';
  const unsafe = client.unsafe.bind(client) as unknown as Unsafe;
  const recording: Unsafe = (text, params, options) => {
    const query = unsafe(text, params, options);
    const values = query.values.bind(query);
    query.values = async () => {
      const rows = await values();
      const known = samples[phase].get(text);
      if (known === undefined || (known.rows.length === 0 && rows.length > 0)) {
        const [row] = rows;
        // A gathered statement's sample: the call its first row answers.
        const of = callsOf(params);
        const call = (row && of.find(({ key }) => row.includes(key))) ?? of[0];
        samples[phase].set(text, { scope: call?.scope, key: call?.key, rows });
      }
      return rows;
    };
    return query;
  };
  const recordedDb = drizzle(Object.assign(Object.create(client), { unsafe: recording }));
  const recordKeys = Array.from({ length: 64 }, () => randomUUID());
  for (const current of ['first', 'replay'] as const) {
    phase = current;
    const recorded = createIdempotency({ store: drizzleStore(recordedDb) });
    await callsPerSecond(IN_FLIGHT, recordKeys.length, async (call) => {
      const key = recordKeys[call] as string;
      await recorded.execute({ scope: SCOPE, key, input: INPUT }, async () => RESULT);
    });
  }

  // The stand-in: each statement answered from its sample, made over for its calls.
  const standIn: Unsafe = (text, params) => {
    const sample = samples[phase].get(text);
    if (sample === undefined) {
      throw new Error(
        `pgEngineJs: no answer recorded for this ${phase} statement: ${text.slice(0, 80)}…`,
      );
    }
    const rows = answerFrom(sample, params);
    return Object.assign(Promise.resolve(rows), {
      values: () => Promise.resolve(rows.map((row) => [...row])),
    });
  };
  const fake = { options: { parsers: {}, serializers: {} }, unsafe: standIn };
  const allocations = process.env.ALLOC ? new Session() : undefined;
  allocations?.connect();

  for (const current of phases) {
    phase = current;
    // A store of its own per phase: its claims start from no history, as after a restart.
    const engine = createIdempotency({
      store: drizzleStore(drizzle(fake as unknown as postgres.Sql)),
    });
    await allocations?.post('HeapProfiler.startSampling', SAMPLING);
    const cpu = process.cpuUsage();
    const rate = await callsPerSecond(IN_FLIGHT, calls, async (call) => {
      const { replayed } = await engine.execute(
        { scope: SCOPE, key: `k${call}`, input: INPUT },
        async () => RESULT,
      );
      if (replayed !== (phase === 'replay')) throw new Error(`${phase}: replayed ${replayed}`);
    });
    const used = process.cpuUsage(cpu);
    console.log(
      `${phase.padEnd(6)} ${(1e6 / rate).toFixed(2)} µs per call, CPU ${((used.user + used.system) / calls).toFixed(2)} µs`,
    );
    if (allocations) {
      const { profile } = await allocations.post('HeapProfiler.stopSampling');
      printAllocations(profile.head, calls);
    }
  }
  return 0;
});

/** A node of V8's sampling heap profile: a call site, what it allocated itself, its callees. */
interface AllocationNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: AllocationNode[];
}

/** Bytes allocated per call, in all and by the 15 functions that allocate most. */
function printAllocations(head: AllocationNode, calls: number): void {
  const bySite = new Map<string, number>();
  const visit = ({ callFrame, selfSize, children }: AllocationNode) => {
    const file = callFrame.url.split('/').slice(-2).join('/');
    const site = `${callFrame.functionName || '(anonymous)'} ${file}:${callFrame.lineNumber + 1}`;
    bySite.set(site, (bySite.get(site) ?? 0) + selfSize);
    for (const child of children) visit(child);
  };
  visit(head);
  const perCall = (bytes: number) => `${(bytes / calls).toFixed(0).padStart(6)} B`;
  const total = [...bySite.values()].reduce((sum, bytes) => sum + bytes, 0);
  console.log(`${perCall(total)} allocated per call, of which:`);
  const top = [...bySite].sort((a, b) => b[1] - a[1]).slice(0, 15);
  for (const [site, bytes] of top) console.log(`${perCall(bytes)}  ${site}`);
}
