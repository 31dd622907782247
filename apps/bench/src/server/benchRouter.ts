import { type IdempotencyRequestContext, idempotent, withIdempotencyErrorData } from '@idem/server';
import type { PgDatabaseLike } from '@idem/server/postgres';
import { initTRPC } from '@trpc/server';
import superjson from 'superjson';
import { z } from 'zod';
import { benchOrders } from './schema.js';

export interface BenchContext extends IdempotencyRequestContext {
  /** The tenant the call acts for (`x-tenant` header). */
  principal: string;
}

const orderInput = z.object({
  sku: z.string().min(1).max(64),
  quantity: z.number().int().positive(),
  ref: z.string().min(1).max(100),
});
type OrderInput = z.infer<typeof orderInput>;

/**
 * One mutation, five ways: the same one-row INSERT without idem (`plain`, autocommit), the
 * same INSERT inside a plain `db.transaction` (`plainTx`: what a procedure that needs
 * transaction mode costs without idem), under idem's lease mode (claim, INSERT, fenced
 * completion), under transaction mode (claim, INSERT and completion in one transaction),
 * and lease mode that waits for a busy key (`leaseWait`, for the duplicate storm). Replays
 * hit `lease` and `transaction` with completed keys.
 */
export function createBenchRouter(db: PgDatabaseLike) {
  const t = initTRPC.context<BenchContext>().create({
    transformer: superjson,
    isDev: false,
    errorFormatter: ({ shape, error }) => withIdempotencyErrorData(shape, error),
  });
  const scope = ({ ctx }: { ctx: BenchContext }) => `tenant:${ctx.principal}`;

  const insertOrder = async (executor: PgDatabaseLike, principal: string, input: OrderInput) => {
    const [row] = await executor
      .insert(benchOrders)
      .values({ principal, sku: input.sku, quantity: input.quantity, ref: input.ref })
      .returning({ id: benchOrders.id });
    return { orderId: row!.id, sku: input.sku, quantity: input.quantity };
  };

  return t.router({
    plain: t.procedure
      .input(orderInput)
      .mutation(({ ctx, input }) => insertOrder(db, ctx.principal, input)),

    plainTx: t.procedure
      .input(orderInput)
      .mutation(({ ctx, input }) => db.transaction((tx) => insertOrder(tx, ctx.principal, input))),

    lease: t.procedure
      .use(idempotent({ db, scope }))
      .input(orderInput)
      .mutation(({ ctx, input }) => insertOrder(db, ctx.principal, input)),

    transaction: t.procedure
      .use(idempotent({ mode: 'transaction', db, scope }))
      .input(orderInput)
      .mutation(({ ctx, input }) => insertOrder(ctx.idempotency.tx, ctx.principal, input)),

    leaseWait: t.procedure
      .use(idempotent({ db, scope, inProgress: { waitMs: 30_000, pollMs: 10 } }))
      .input(orderInput)
      .mutation(({ ctx, input }) => insertOrder(db, ctx.principal, input)),
  });
}

export type BenchRouter = ReturnType<typeof createBenchRouter>;
