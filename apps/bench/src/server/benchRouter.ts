import { createHash } from 'node:crypto';
import { idempotent } from '@idem/server';
import type { PgDatabaseLike } from '@idem/server/postgres';
import { TRPCError } from '@trpc/server';
import type { Sql } from 'postgres';
import { z } from 'zod';
import { required } from '../lib/required.js';
import { initIdemTrpc } from './idemTrpc.js';
import { benchOrders } from './schema.js';

const orderInput = z.object({
  sku: z.string().min(1).max(64),
  quantity: z.number().int().positive(),
  ref: z.string().min(1).max(100),
});
type OrderInput = z.infer<typeof orderInput>;

/**
 * One mutation, six ways: the same one-row INSERT without idem (`plain`, autocommit), the
 * same INSERT inside a plain `db.transaction` (`plainTx`: what a procedure that needs
 * transaction mode costs without idem), under idem's lease mode (claim, INSERT, fenced
 * completion), under transaction mode (claim, INSERT and completion in one transaction),
 * lease mode that waits for a busy key (`leaseWait`, for the duplicate storm), and the
 * floor under lease mode (`leaseFloor`): the statements lease mode cannot do without, a
 * claim and a completion of the key in `idem_keys` around the INSERT, sent as postgres-js
 * prepared statements through `client` with no idem code. Replays hit `lease` and
 * `transaction` with completed keys.
 */
export function createBenchRouter(db: PgDatabaseLike, client: Sql) {
  const { t, scope } = initIdemTrpc();

  const insertOrder = async (executor: PgDatabaseLike, principal: string, input: OrderInput) => {
    const [row] = await executor
      .insert(benchOrders)
      .values({ principal, sku: input.sku, quantity: input.quantity, ref: input.ref })
      .returning({ id: benchOrders.id });
    return {
      orderId: required(row, 'the inserted order').id,
      sku: input.sku,
      quantity: input.quantity,
    };
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

    leaseFloor: t.procedure.input(orderInput).mutation(async ({ ctx, input, path }) => {
      const key = ctx.idempotencyRequest.keyOf(0);
      if (key === undefined) throw new TRPCError({ code: 'BAD_REQUEST', message: 'no key' });
      const scope = `tenant:${ctx.principal}/${path}`;
      const fingerprint = createHash('sha256')
        .update(JSON.stringify({ path, input }))
        .digest('hex');
      // The claim of a new key: the insert, returning the record lease mode decides from.
      const [claimed] = await client`insert into idem_keys (scope, key, fingerprint, status,
          version, locked_until, attempts, steps, created_at, expires_at)
        values (${scope}, ${key}, ${fingerprint}, 'in_progress', 1,
          now() + interval '30 seconds', 1, '{}', now(), now() + interval '1 day')
        on conflict do nothing returning *`;
      if (!claimed) throw new TRPCError({ code: 'CONFLICT', message: 'key exists' });
      const result = await insertOrder(db, ctx.principal, input);
      // The completion, fenced as lease mode's is.
      const completed = await client`update idem_keys set status = 'completed',
          outcome = ${JSON.stringify({ kind: 'success', value: result })}::json,
          completed_at = now(), locked_until = null
        where scope = ${scope} and key = ${key} and version = 1
          and created_at = ${claimed.created_at} and status = 'in_progress'
        returning version`;
      if (completed.length !== 1) throw new Error('the floor lost its key');
      return result;
    }),

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
