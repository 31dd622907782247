import type { IdempotencyEvent, IdempotencyEventType } from '@idem/core';
import {
  type IdempotencyRequestContext,
  idempotencyContext,
  idempotencyErrorFormatter,
  idempotent,
} from '@idem/server';
import { migrate } from '@idem/server/postgres';
import { serveFetch } from '@idem/server/testing';
import { initTRPC } from '@trpc/server';
import { fetchRequestHandler } from '@trpc/server/adapters/fetch';
import { sql } from 'drizzle-orm';
import { pgTable, serial, text } from 'drizzle-orm/pg-core';
import { drizzle, type PostgresJsDatabase } from 'drizzle-orm/postgres-js';
import postgres from 'postgres';
import superjson from 'superjson';
import { z } from 'zod';
import { createScratchDatabase, DATABASE_URL, quiet } from './scratchDatabase.js';

/**
 * The side effect: one row per execution of a place-order procedure. `execution` numbers
 * the executions, so a call's result names the one run that produced it, and two rows
 * with one `call_id` are a duplicate order.
 */
export const placed = pgTable('placed', {
  execution: serial('execution').primaryKey(),
  callId: text('call_id').notNull(),
});

const CREATE_PLACED = sql`create table placed (
  execution serial primary key, call_id text not null)`;

export interface Context extends IdempotencyRequestContext {
  /** Who is calling; part of every key's scope, so one user's key never replays another's. */
  user: string;
}

/** What both place-order procedures answer: which call, and which execution ran it. */
export interface PlacedOrder {
  callId: string;
  execution: number;
}

const placeInput = z.object({ callId: z.string().min(1) });

export function createAppRouter(
  db: PostgresJsDatabase,
  onEvent?: (event: IdempotencyEvent) => void,
) {
  const t = initTRPC.context<Context>().create({
    transformer: superjson,
    // Adds data.idempotency to idem's own errors, so the client tells its 409 "key busy"
    // from the procedure's own CONFLICTs.
    errorFormatter: idempotencyErrorFormatter,
  });

  const placeOrder = async (callId: string): Promise<PlacedOrder> => {
    const [row] = await db.insert(placed).values({ callId }).returning();
    if (!row) throw new Error(`the insert of call ${callId} returned no row`);
    return { callId, execution: row.execution };
  };

  return t.router({
    order: t.router({
      /** Runs once per idempotency key; every retry with that key gets the stored result. */
      place: t.procedure
        .use(
          idempotent({
            db,
            scope: ({ ctx }: { ctx: Context }) => `user:${ctx.user}`,
            // The insert stands for an external side effect (a card charge): the claim
            // commits first, the completion is fenced.
            mode: 'lease',
            ...(onEvent ? { onEvent } : {}),
          }),
        )
        .input(placeInput)
        .mutation(({ input }) => placeOrder(input.callId)),

      /** The same write with no protection: every request that arrives runs it. */
      placeUnprotected: t.procedure
        .input(placeInput)
        .mutation(({ input }) => placeOrder(input.callId)),
    }),
  });
}

export type AppRouter = ReturnType<typeof createAppRouter>;

export interface KeyedRetriesServer {
  /** The tRPC endpoint, e.g. `http://127.0.0.1:54321/trpc`; a new port after `restart`. */
  readonly trpcUrl: string;
  /**
   * A server restart as the client sees it: every open connection is reset, then
   * connections are refused for `downMs`, then the app serves again on a new port (read
   * `trpcUrl` again). Procedures already running when it stops finish on the database,
   * their replies lost.
   */
  restart(downMs: number): Promise<void>;
  /** How often each idem event happened so far (claimed, replayed, in_progress, …). */
  events(): Record<IdempotencyEventType, number>;
  /** tRPC operations received so far: a batch request carries several. */
  operationsReceived(): number;
  /** The `placed` rows whose call id starts with `prefix`, oldest first. */
  placedRows(prefix: string): Promise<PlacedOrder[]>;
  /** Stops the HTTP server, ends the connections and drops the scratch database. */
  close(): Promise<void>;
}

/**
 * Starts the app on a fresh database of its own (`idem_keyed_retries_<random>` on
 * `databaseUrl`'s server, migrated), served over HTTP on 127.0.0.1 and a free port.
 */
export async function startServer(databaseUrl = DATABASE_URL): Promise<KeyedRetriesServer> {
  const scratch = await createScratchDatabase(databaseUrl);
  const client = postgres(scratch.url, { ...quiet, max: 10 });
  const stopDatabase = async () => {
    await client.end({ timeout: 5 });
    await scratch.drop();
  };
  try {
    const db = drizzle(client);
    await migrate(db);
    await db.execute(CREATE_PLACED);

    const events = emptyEventCounts();
    const router = createAppRouter(db, (event) => {
      events[event.type] += 1;
    });
    let operationsReceived = 0;
    const serve = () =>
      serveFetch((req) => {
        operationsReceived += operationsIn(req.url);
        return fetchRequestHandler({
          endpoint: '/trpc',
          req,
          router,
          createContext: ({ req, resHeaders }): Context => ({
            ...idempotencyContext({ req, resHeaders }),
            user: req.headers.get('x-user') ?? 'anonymous',
          }),
        });
      });
    let http = await serve();
    return {
      get trpcUrl() {
        return `${http.url}/trpc`;
      },
      async restart(downMs) {
        await http.close();
        await new Promise((resolve) => setTimeout(resolve, downMs));
        http = await serve();
      },
      events: () => ({ ...events }),
      operationsReceived: () => operationsReceived,
      placedRows: (prefix) =>
        db
          .select()
          .from(placed)
          // starts_with, not LIKE: a `_` or `%` in the prefix is no wildcard.
          .where(sql`starts_with(${placed.callId}, ${prefix})`)
          .orderBy(placed.execution),
      async close() {
        await http.close();
        await stopDatabase();
      },
    };
  } catch (error) {
    await stopDatabase();
    throw error;
  }
}

/** `/trpc/order.place,order.place?batch=1` carries two operations. */
export function operationsIn(url: string): number {
  const paths = new URL(url).pathname.split('/trpc/')[1] ?? '';
  return paths.split(',').length;
}

function emptyEventCounts(): Record<IdempotencyEventType, number> {
  return {
    claimed: 0,
    takeover: 0,
    replayed: 0,
    in_progress: 0,
    mismatch: 0,
    completed: 0,
    released: 0,
    lease_lost: 0,
  };
}
