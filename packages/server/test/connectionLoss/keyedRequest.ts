import { initTRPC, TRPCError } from '@trpc/server';
import { fetchRequestHandler } from '@trpc/server/adapters/fetch';
import { sql } from 'drizzle-orm';
import superjson from 'superjson';
import { idempotentHandler } from '../../src/fetch/index.js';
import type { PgDatabaseLike } from '../../src/postgres/PgDatabaseLike.js';
import { type FetchServer, serveFetch } from '../../src/testing/serveFetch.js';
import {
  type IdempotencyRequestContext,
  idempotencyContext,
  idempotent,
} from '../../src/trpc/index.js';
import type { Deferred } from '../fixtures/deferred.js';
import { rows } from '../harness.js';
import { mutate } from '../httpClient.js';

export type Adapter = 'tRPC' | 'Fetch';
export type Mode = 'lease' | 'transaction';

/** One order: written under `tag`; `refuse` answers a refusal the policy stores. */
export interface Order {
  tag: string;
  refuse?: boolean;
  /**
   * Say which backend it runs on and wait to be let go (a slow call to another service),
   * after writing the order or before it.
   */
  idle?: 'after-write' | 'before-write';
}

/** How a request was answered: its status, or the error the Fetch handler threw on. */
export type Answer = { status: number } | { thrown: unknown };

/** The status a refusal is stored and replayed with, by adapter. */
export const REFUSED: Record<Adapter, number> = { tRPC: 403, Fetch: 422 };

/** What the handler does, with who waits for an idle one. */
export interface Handling {
  /** Runs of the handler, by tag. */
  runs: Map<string, number>;
  idle: { pid: Deferred<number>; go: Deferred<void> };
}

/** The lease keys are held with in lease mode: short, as a test waits it out. */
export const LEASE_MS = 2_000;

/**
 * One handler, in the adapter's shape and mode, on `db`: counts its run, writes the
 * order (through `tx` in transaction mode, `db` in lease mode), then answers.
 */
async function placeOrder(order: Order, writer: PgDatabaseLike, handling: Handling) {
  handling.runs.set(order.tag, (handling.runs.get(order.tag) ?? 0) + 1);
  const idle = async () => {
    const [row] = await rows<{ pid: number }>(writer, sql`select pg_backend_pid() as pid`);
    handling.idle.pid.resolve(Number(row?.pid));
    await handling.idle.go.promise;
  };
  if (order.idle === 'before-write') await idle();
  await writer.execute(sql`insert into loss_orders (tag) values (${order.tag})`);
  if (order.idle === 'after-write') await idle();
}

/**
 * Sends keyed orders to the adapter under test, in `mode`, on `db`: the tRPC middleware
 * behind a real HTTP server, or the Fetch handler called as a framework would. `close`
 * stops the server.
 */
export async function keyedRequests(
  adapter: Adapter,
  mode: Mode,
  db: PgDatabaseLike,
  handling: Handling,
): Promise<{ send(key: string, order: Order): Promise<Answer>; close(): Promise<void> }> {
  const common = { db, scope: () => 'user:ann', leaseMs: LEASE_MS };
  if (adapter === 'Fetch') {
    const answer = async (request: Request, writer: PgDatabaseLike) => {
      const order = (await request.json()) as Order;
      await placeOrder(order, writer, handling);
      if (order.refuse) return Response.json({ error: 'out of stock' }, { status: 422 });
      return Response.json({ order: order.tag });
    };
    const handler =
      mode === 'transaction'
        ? idempotentHandler({ ...common, mode }, (request, { tx }) => answer(request, tx))
        : idempotentHandler({ ...common, mode }, (request) => answer(request, db));
    return {
      send: (key, order) =>
        handler(
          new Request('http://shop.test/orders', {
            method: 'POST',
            headers: { 'content-type': 'application/json', 'idempotency-key': key },
            body: JSON.stringify(order),
          }),
        ).then(
          (response) => ({ status: response.status }),
          (thrown: unknown) => ({ thrown }),
        ),
      close: async () => {},
    };
  }
  const t = initTRPC.context<IdempotencyRequestContext>().create({ transformer: superjson });
  const router = t.router({
    order: t.procedure
      .use(
        mode === 'transaction'
          ? idempotent({ ...common, mode: 'transaction' })
          : idempotent({ ...common, mode: 'lease' }),
      )
      .input((value: unknown) => value as Order)
      .mutation(async ({ ctx, input }) => {
        const idempotency = ctx.idempotency as { tx?: PgDatabaseLike };
        await placeOrder(input, idempotency.tx ?? db, handling);
        if (input.refuse) throw new TRPCError({ code: 'FORBIDDEN', message: 'out of stock' });
        return { order: input.tag };
      }),
  });
  const server: FetchServer = await serveFetch((req) =>
    fetchRequestHandler({ endpoint: '/trpc', req, router, createContext: idempotencyContext }),
  );
  return {
    send: async (key, order) => ({
      status: (await mutate(server.url, 'order', order, { 'Idempotency-Key': key })).status,
    }),
    close: () => server.close(),
  };
}
