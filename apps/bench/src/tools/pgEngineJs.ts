/**
 * `tsx src/tools/pgEngineJs.ts [calls=200000] [phases=first,replay]`: what the engine on
 * Postgres (`createIdempotency` + `drizzleStore` on postgres-js) costs in JavaScript alone,
 * without the database. Each statement is answered once by Postgres (a scratch database),
 * and those answers are then handed back at once by a stand-in for the postgres-js client,
 * so every call runs idem's and Drizzle's code and none of the network's, the driver's or
 * the server's: µs per call (16 in flight) and this process's CPU per call. Steadier than
 * any timing against the database; run it under `node --cpu-prof --import tsx` to see where
 * the time goes. `ALLOC=1` also prints what each phase allocates per call, by function (V8's
 * sampling heap profiler, objects collected since included): garbage the collector must
 * then sweep while the calls wait. The profiler slows the calls: compare timings without it.
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

/** The statement a text is: the first word tells idem's statements apart. */
const statementOf = (text: string) => text.slice(0, text.indexOf(' '));

runMain(async () => {
  const calls = Number(process.argv[2] ?? 200_000);
  const phases = (process.argv[3] ?? 'first,replay').split(',') as Phase[];
  const { client } = await measuredDatabase('idem_js', 4);

  // Postgres answers each statement once: a new key's claim and completion, then replays.
  const answers = new Map<string, Rows>();
  const unsafe = client.unsafe.bind(client) as unknown as Unsafe;
  const recording: Unsafe = (text, params, options) => {
    const query = unsafe(text, params, options);
    const values = query.values.bind(query);
    query.values = async () => {
      const rows = await values();
      if (rows.length > 0) answers.set(statementOf(text), rows);
      return rows;
    };
    return query;
  };
  const recorded = createIdempotency({
    store: drizzleStore(drizzle(Object.assign(Object.create(client), { unsafe: recording }))),
  });
  const key = randomUUID();
  // Enough replays for the store to read first (its claims found their key).
  for (let call = 0; call < 40; call++) {
    await recorded.execute({ scope: SCOPE, key, input: INPUT }, async () => RESULT);
  }

  // The stand-in: a new key's INSERT claims it and a read finds nothing while new keys run;
  // a replay's INSERT finds the key and its read the completed row.
  let phase: Phase = 'first';
  const answer = (text: string): Rows => {
    const statement = statementOf(text);
    if (phase === 'replay' && statement === 'insert') return [];
    if (phase === 'first' && statement === 'select') return [];
    return answers.get(statement) ?? [];
  };
  const standIn: Unsafe = (text) => {
    const rows = answer(text);
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
