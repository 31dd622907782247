import { initTRPC, TRPCError } from '@trpc/server';
import { fetchRequestHandler } from '@trpc/server/adapters/fetch';
import { sql } from 'drizzle-orm';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { rowsOf } from '../src/postgres/rows.js';
import {
  type IdempotencyRequestContext,
  idempotencyContext,
  idempotent,
  withIdempotencyErrorData,
} from '../src/trpc/index.js';
import { keyHeader, user } from './fixtures/requestArbitraries.js';
import { useFetchServer } from './fixtures/useFetchServer.js';
import { rows, useDatabase } from './harness.js';
import { nodePost } from './httpClient.js';

/**
 * Random requests against the real middleware, over real HTTP, on real Postgres, in both
 * modes: whatever the body, the key spelling or the path, the answer is never a 500 and
 * never shows SQL or a stack, nothing is stored for a call that never ran, and no
 * (scope, key) runs twice.
 */

const NUM_RUNS = Number(process.env.FC_NUM_RUNS ?? 150);
const MAX_INPUT_BYTES = 4_096;
const SQL_OR_STACK =
  /insert into|select |update "|idem_keys|Failed query|syntax error at|\n\s+at |\.ts:\d+|node_modules/i;

interface Context extends IdempotencyRequestContext {
  user: string;
}

/** Each run of a procedure, by `scope \u0001 key`. */
const executions = new Map<string, number>();
const ran = (idempotency: { scope: string; key: string }) => {
  const id = `${idempotency.scope}\u0001${idempotency.key}`;
  executions.set(id, (executions.get(id) ?? 0) + 1);
};

function createRouter(db: ReturnType<ReturnType<typeof useDatabase>>['db']) {
  const t = initTRPC.context<Context>().create({
    errorFormatter: ({ shape, error }) => withIdempotencyErrorData(shape, error),
  });
  const scope = ({ ctx }: { ctx: Context }) => `user:${ctx.user}`;
  const lease = t.procedure.use(idempotent({ db, scope, maxInputBytes: MAX_INPUT_BYTES }));
  const tx = t.procedure.use(
    idempotent({ mode: 'transaction', db, scope, maxInputBytes: MAX_INPUT_BYTES }),
  );
  // A hand-written validator, so that no schema library is needed to tell good from bad.
  const order = (input: unknown) => {
    const { id, n } = (input ?? {}) as { id?: unknown; n?: unknown };
    if (typeof id !== 'string' || !Number.isInteger(n)) {
      throw new Error('expected { id: string, n: integer }');
    }
    return { id, n: n as number };
  };
  return t.router({
    lease: lease.input(order).mutation(({ ctx, input }) => {
      ran(ctx.idempotency);
      if (input.n < 0) throw new TRPCError({ code: 'BAD_REQUEST', message: 'n must be >= 0' });
      return { id: input.id, n: input.n };
    }),
    tx: tx.input(order).mutation(async ({ ctx, input }) => {
      ran(ctx.idempotency);
      await ctx.idempotency.tx.execute(
        sql`insert into property_runs (scope, key) values (${ctx.idempotency.scope}, ${ctx.idempotency.key})`,
      );
      if (input.n < 0) throw new TRPCError({ code: 'BAD_REQUEST', message: 'n must be >= 0' });
      return { id: input.id, n: input.n };
    }),
    anything: lease
      .input((input: unknown) => input)
      .mutation(({ ctx }) => {
        ran(ctx.idempotency);
        return 'ok';
      }),
    noInput: tx.mutation(({ ctx }) => {
      ran(ctx.idempotency);
      return 'ok';
    }),
    ping: t.procedure.query(() => 'pong'),
  });
}

/** POSTs with node:http, which can send two header lines and Latin-1 bytes. */
function post(
  url: string,
  path: string,
  body: string | undefined,
  headers: Record<string, string | string[]>,
): Promise<{ status: number; text: string }> {
  return nodePost(`${url}/trpc/${path}`, body, { 'content-type': 'application/json', ...headers });
}

const path = fc.oneof(
  { weight: 8, arbitrary: fc.constantFrom('lease', 'tx') },
  { weight: 3, arbitrary: fc.constantFrom('anything', 'noInput', 'ping', 'nope', 'lease,tx') },
);
const deep = (depth: number) => `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
const validInput = fc.record({
  id: fc.constantFrom('a', 'b'),
  n: fc.integer({ min: -1, max: 2 }),
});
const body = fc.oneof(
  { weight: 8, arbitrary: validInput.map((input) => JSON.stringify(input)) },
  validInput.map((input) => JSON.stringify(input).slice(0, -1)), // malformed JSON
  fc.jsonValue({ maxDepth: 3 }).map((value) => JSON.stringify(value)), // wrong types
  fc.constantFrom(500, 1_500, 10_000).map(deep), // deep nesting
  fc.constant(JSON.stringify({ id: 'a', n: 1, pad: 'x'.repeat(MAX_INPUT_BYTES) })), // huge
  fc.constant(undefined), // empty
  fc.constant('{"id":"a","n":1}\u0000'),
);
const call = fc.record({ path, body, key: keyHeader, user });

describe('idempotent(): random requests over HTTP on Postgres (property)', () => {
  const database = useDatabase('Postgres');
  const url = useFetchServer(async () => {
    const { db } = database();
    await db.execute(sql`create table property_runs (scope text not null, key text not null)`);
    const router = createRouter(db);
    return (req: Request) =>
      fetchRequestHandler({
        endpoint: '/trpc',
        req,
        router,
        createContext: (opts): Context => ({
          ...idempotencyContext(opts),
          user: opts.req.headers.get('x-user') ?? 'anonymous',
        }),
      });
  });

  it('never a 500, never SQL or a stack, nothing stored that never ran, at most one run per key', async () => {
    const { db } = database();
    await fc.assert(
      fc.asyncProperty(fc.array(call, { minLength: 1, maxLength: 3 }), async (calls) => {
        // Sent together: duplicates race, as retries do.
        const responses = await Promise.all(
          calls.map((one) => post(url(), one.path, one.body, { ...one.key, 'x-user': one.user })),
        );
        for (const response of responses) {
          expect(response.status).toBeGreaterThanOrEqual(200);
          expect(response.status, response.text).toBeLessThan(500);
          expect(response.text).not.toMatch(SQL_OR_STACK);
        }
        const stored = await rows<{ scope: string; key: string; status: string }>(
          db,
          sql`select scope, key, status from idem_keys`,
        );
        for (const row of stored) {
          // Every stored key belongs to a call that ran, and none is left in progress.
          expect(executions.get(`${row.scope}\u0001${row.key}`) ?? 0).toBe(1);
          expect(row.status).toBe('completed');
        }
        for (const count of executions.values()) expect(count).toBe(1);
        const businessRows = rowsOf<{ n: number }>(
          await db.execute(
            sql`select count(*)::int as n from property_runs group by scope, key having count(*) > 1`,
          ),
        );
        // A transaction-mode error rolls its writes back; a success keeps exactly one.
        expect(businessRows).toEqual([]);
      }),
      { numRuns: NUM_RUNS },
    );
    // The property exercised what it claims to: calls ran in both modes.
    const ranIn = (procedure: string) =>
      [...executions.keys()].some((id) => id.includes(`/${procedure}\u0001`));
    expect(ranIn('lease')).toBe(true);
    expect(ranIn('tx')).toBe(true);
  }, 240_000);
});
