import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { connect as connectTcp, type Socket } from 'node:net';
import { idempotencyContext } from '@idem/server';
import { drizzleStore } from '@idem/server/postgres';
import { drizzle } from 'drizzle-orm/postgres-js';
import postgres from 'postgres';
import { quiet } from '../lib/config.js';
import { claimCompletePair } from '../lib/storePair.js';
import { createBenchRouter } from '../server/benchRouter.js';
import type { RunContext } from './RunContext.js';

interface Counts {
  /** Statements postgres-js built (its `debug` hook). */
  statements: number;
  /** Writes to the socket: each is a flight the client then waits on, when calls run one at a time. */
  flights: number;
}

/**
 * Round trips per request, counted where they happen: on the socket of a one-connection
 * postgres-js pool. Calls run one after another through the real router (tRPC's
 * `createCaller`, the same middleware as over HTTP), so every write to the socket is a
 * flight the request waits for. This is the evidence for where the time of the HTTP and
 * store scenarios goes: idem's cost budget counts statements; postgres-js sends an unprepared
 * statement with parameters in two flights (Parse/Describe, then Bind/Execute), and
 * Drizzle sends every statement unprepared.
 */
export async function roundTrips(context: RunContext): Promise<void> {
  const calls = context.quick ? 20 : 200;
  const counts: Counts = { statements: 0, flights: 0 };
  const url = new URL(context.databaseUrl);
  // `socket` is a documented postgres-js option (a connected socket of your own) that its
  // type declarations do not list.
  const options: postgres.Options<Record<string, never>> & { socket: () => Promise<Socket> } = {
    ...quiet,
    max: 1,
    debug: () => {
      counts.statements++;
    },
    socket: async () => {
      const socket: Socket = connectTcp(Number(url.port || 5432), url.hostname);
      await once(socket, 'connect');
      const write = socket.write.bind(socket) as (...args: unknown[]) => boolean;
      socket.write = ((...args: unknown[]) => {
        counts.flights++;
        return write(...args);
      }) as typeof socket.write;
      return socket;
    },
  };
  const client = postgres(context.databaseUrl, options);
  try {
    const db = drizzle(client);
    const caller = createBenchRouter(db, client).createCaller;
    const call = (key: string | undefined) =>
      caller({ ...idempotencyContext({ key }), principal: 'round-trips' });
    const input = { sku: 'tea', quantity: 1, ref: 'round-trips' };
    const store = drizzleStore(db);
    const prepared = (statement: string, params: unknown[]) =>
      client.unsafe(statement, params as never[], { prepare: true });

    // Each mode's first calls run under new keys, kept for its replays.
    const keys = { lease: [] as string[], transaction: [] as string[] };
    const firstCalls = (mode: keyof typeof keys, prefix: string) => (index: number) => {
      const key = `${prefix}-${index}-${randomUUID()}`;
      keys[mode].push(key);
      return call(key)[mode](input);
    };
    const replays = (mode: keyof typeof keys) => (index: number) =>
      call(keys[mode][index % keys[mode].length])[mode](input);
    const variants: [string, string, (index: number) => Promise<unknown>][] = [
      ['plain (no idem)', '1 INSERT', () => call(undefined).plain(input)],
      [
        'plainTx (no idem, in a transaction)',
        'BEGIN, INSERT, COMMIT',
        () => call(undefined).plainTx(input),
      ],
      ['lease mode', '+ claim, + completion', firstCalls('lease', 'rt-lease')],
      ['transaction mode', '≤ 2 statements inside the tx', firstCalls('transaction', 'rt-tx')],
      ['replay (lease)', 'one read', replays('lease')],
      ['replay (transaction)', 'one read', replays('transaction')],
      [
        'drizzleStore claim + complete',
        '2 statements',
        claimCompletePair(
          store,
          {
            scope: 'tenant:rt/pair',
            fingerprint: 'f'.repeat(64),
            leaseMs: 30_000,
            ttlMs: 86_400_000,
          },
          1,
        ),
      ],
      [
        'raw INSERT, prepared (postgres-js default)',
        '1 statement',
        () =>
          prepared(
            'insert into bench_orders (principal, sku, quantity, ref) values ($1, $2, $3, $4)',
            ['rt', 'tea', 1, 'rt'],
          ),
      ],
    ];

    for (const [variant, budget, run] of variants) {
      for (let index = 0; index < 5; index++) await run(index); // connect, prepare, warm
      const before = { ...counts };
      for (let index = 0; index < calls; index++) await run(index + 5);
      const statements = (counts.statements - before.statements) / calls;
      const flights = (counts.flights - before.flights) / calls;
      context.report({
        scenario: 'round trips per request (1 conn)',
        variant,
        result: `${flights.toFixed(1)} trips, ${statements.toFixed(1)} stmts`,
        target: budget,
        verdict: 'info',
      });
    }
  } finally {
    await client.end({ timeout: 5 });
  }
}
