import type { HandlerContext } from '@idem/core';
import { memoryStore } from '@idem/core/testing';
import { initTRPC, TRPCError } from '@trpc/server';
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite';
import { drizzle as drizzlePostgres } from 'drizzle-orm/postgres-js';
import superjson from 'superjson';
import { describe, expect, expectTypeOf, it } from 'vitest';
import { z } from 'zod';
import type { TransactionIdempotency, TransactionOf } from '../src/postgres/index.js';
import {
  type IdempotencyErrorData,
  type IdempotencyRequestContext,
  idempotencyContext,
  idempotent,
  idempotentProcedure,
  type LeaseIdempotency,
  withIdempotencyErrorData,
} from '../src/trpc/index.js';

interface Context extends IdempotencyRequestContext {
  user: { id: string } | null;
}

const t = initTRPC.context<Context>().create({
  transformer: superjson,
  errorFormatter: ({ shape, error }) => withIdempotencyErrorData(shape, error),
});
const store = memoryStore();
// Databases without a connection: these tests only build procedures, they never call them.
const pglite = drizzlePglite.mock();
const postgresJs = drizzlePostgres.mock();

type PgliteTx = TransactionOf<typeof pglite>;
type PostgresJsTx = TransactionOf<typeof postgresJs>;

describe('ctx.idempotency types', () => {
  it('lease mode: key, step, deriveKey, signal, attempt, takeover; no tx', () => {
    t.procedure
      .use(idempotent({ store, scope: ({ ctx }) => `user:${ctx.user?.id}` }))
      .mutation(({ ctx }) => {
        expectTypeOf(ctx.idempotency).toEqualTypeOf<LeaseIdempotency>();
        expectTypeOf(ctx.idempotency).toEqualTypeOf<HandlerContext>();
        expectTypeOf(ctx.idempotency.key).toEqualTypeOf<string>();
        expectTypeOf(ctx.idempotency.signal).toEqualTypeOf<AbortSignal>();
        expectTypeOf(ctx.idempotency.attempt).toEqualTypeOf<number>();
        expectTypeOf(ctx.idempotency.takeover).toEqualTypeOf<boolean>();
        expectTypeOf(ctx.idempotency.deriveKey).toEqualTypeOf<(suffix: string) => string>();
        expectTypeOf(ctx.idempotency.step<number>)
          .parameter(1)
          .toEqualTypeOf<() => Promise<number> | number>();
        expectTypeOf(ctx.idempotency).not.toHaveProperty('tx');
        // The app's own context is still there, unchanged.
        expectTypeOf(ctx.user).toEqualTypeOf<{ id: string } | null>();
        return null;
      });
  });

  it('lease mode on a db: the same as with a store', () => {
    t.procedure
      .use(idempotent({ db: pglite, scope: ({ ctx }) => `user:${ctx.user?.id}` }))
      .mutation(({ ctx }) => {
        expectTypeOf(ctx.idempotency).toEqualTypeOf<LeaseIdempotency>();
        return null;
      });
  });

  it('transaction mode: tx is the transaction of the db passed in (PGlite)', () => {
    t.procedure
      .use(idempotent({ mode: 'transaction', db: pglite, scope: () => 'tenant' }))
      .mutation(({ ctx }) => {
        expectTypeOf(ctx.idempotency).toEqualTypeOf<TransactionIdempotency<PgliteTx>>();
        expectTypeOf(ctx.idempotency.tx).toEqualTypeOf<PgliteTx>();
        expectTypeOf(ctx.idempotency.tx.insert).toBeFunction();
        expectTypeOf(ctx.idempotency.key).toEqualTypeOf<string>();
        return null;
      });
  });

  it('transaction mode: tx is the transaction of the db passed in (postgres-js)', () => {
    t.procedure
      .use(idempotent({ mode: 'transaction', db: postgresJs, scope: () => 'tenant' }))
      .mutation(({ ctx }) => {
        expectTypeOf(ctx.idempotency.tx).toEqualTypeOf<PostgresJsTx>();
        expectTypeOf<PostgresJsTx>().not.toEqualTypeOf<PgliteTx>();
        return null;
      });
  });

  it('required: false makes ctx.idempotency optional', () => {
    t.procedure
      .use(idempotent({ store, required: false, scope: () => 'tenant' }))
      .mutation(({ ctx }) => {
        expectTypeOf(ctx.idempotency).toEqualTypeOf<LeaseIdempotency | undefined>();
        return null;
      });
    t.procedure
      .use(idempotent({ mode: 'transaction', db: pglite, required: false, scope: () => 'x' }))
      .mutation(({ ctx }) => {
        expectTypeOf(ctx.idempotency).toEqualTypeOf<TransactionIdempotency<PgliteTx> | undefined>();
        return null;
      });
  });

  it('scope sees the context as narrowed by earlier middlewares', () => {
    const authed = t.procedure.use(({ ctx, next }) => {
      if (!ctx.user) throw new TRPCError({ code: 'UNAUTHORIZED' });
      return next({ ctx: { user: ctx.user } });
    });
    authed
      .use(
        idempotent({
          store,
          scope: ({ ctx, path }) => {
            expectTypeOf(ctx.user).toEqualTypeOf<{ id: string }>();
            expectTypeOf(path).toEqualTypeOf<string>();
            return `user:${ctx.user.id}`;
          },
        }),
      )
      .mutation(({ ctx }) => {
        expectTypeOf(ctx.user).toEqualTypeOf<{ id: string }>();
        expectTypeOf(ctx.idempotency).toEqualTypeOf<LeaseIdempotency>();
        return null;
      });
  });

  it('key() sees the parsed input after .input(), unknown before, and the context', () => {
    t.procedure
      .input(z.object({ checkoutId: z.string(), cents: z.number() }))
      .use(
        idempotent({
          store,
          scope: () => 'tenant',
          key: ({ input, ctx, path }) => {
            expectTypeOf(input).toEqualTypeOf<{ checkoutId: string; cents: number }>();
            expectTypeOf(ctx.user).toEqualTypeOf<{ id: string } | null>();
            expectTypeOf(path).toEqualTypeOf<string>();
            return input.checkoutId;
          },
        }),
      )
      .mutation(({ ctx, input }) => {
        expectTypeOf(ctx.idempotency).toEqualTypeOf<LeaseIdempotency>();
        expectTypeOf(input.cents).toEqualTypeOf<number>();
        return null;
      });
    t.procedure
      .use(
        idempotent({
          mode: 'transaction',
          db: pglite,
          scope: () => 'tenant',
          key: ({ input }) => {
            expectTypeOf(input).toEqualTypeOf<unknown>();
            // @ts-expect-error before .input() tRPC has not parsed the input: it is unknown
            return input.checkoutId;
          },
        }),
      )
      .input(z.object({ checkoutId: z.string() }))
      .mutation(({ ctx }) => {
        expectTypeOf(ctx.idempotency.tx).toEqualTypeOf<PgliteTx>();
        return null;
      });
    t.procedure
      .input(z.object({ id: z.string() }))
      // @ts-expect-error key() must return a string (or undefined for the request's key)
      .use(idempotent({ store, scope: () => 'tenant', key: ({ input }) => input.id.length }));
  });

  it('works through .concat() with the same ctx.idempotency', () => {
    t.procedure
      .concat(
        idempotentProcedure({ store, scope: ({ ctx }: { ctx: Context }) => `${ctx.user?.id}` }),
      )
      .mutation(({ ctx }) => {
        expectTypeOf(ctx.idempotency).toEqualTypeOf<LeaseIdempotency>();
        expectTypeOf(ctx.user).toEqualTypeOf<{ id: string } | null>();
        return null;
      });
    t.procedure
      .concat(
        idempotentProcedure({
          mode: 'transaction',
          db: postgresJs,
          scope: ({ ctx }: { ctx: Context }) => `${ctx.user?.id}`,
        }),
      )
      .mutation(({ ctx }) => {
        expectTypeOf(ctx.idempotency.tx).toEqualTypeOf<PostgresJsTx>();
        return null;
      });
  });

  it('refuses a context without idempotencyContext(), and transaction mode without db', () => {
    const bare = initTRPC.context<{ user: string }>().create();
    // @ts-expect-error ctx.idempotencyRequest is missing: spread idempotencyContext() into it
    bare.procedure.use(idempotent({ store, scope: ({ ctx }) => ctx.user }));
    // The same mistakes are refused at run time too, for JavaScript callers.
    expect(() =>
      // @ts-expect-error transaction mode claims inside db.transaction: it needs db, not store
      t.procedure.use(idempotent({ mode: 'transaction', store, scope: () => 'x' })),
    ).toThrow("mode 'transaction' needs `db`");
    // @ts-expect-error scope is required
    expect(() => t.procedure.use(idempotent({ store }))).toThrow('needs `scope');
  });

  it('idempotencyContext returns what the middleware reads', () => {
    expectTypeOf(idempotencyContext({ key: 'k' })).toEqualTypeOf<IdempotencyRequestContext>();
    expectTypeOf(
      idempotencyContext({ req: new Request('http://x'), resHeaders: new Headers() }),
    ).toEqualTypeOf<IdempotencyRequestContext>();
  });

  it('the error formatter adds data.idempotency to the error shape', () => {
    const router = t.router({});
    type Shape = (typeof router)['_def']['_config']['$types']['errorShape'];
    expectTypeOf<Shape['data']['idempotency']>().toEqualTypeOf<IdempotencyErrorData | undefined>();
  });
});
