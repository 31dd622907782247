import { createHash } from 'node:crypto';
import { idempotent } from '@idem/server';
import type { PgDatabaseLike } from '@idem/server/postgres';
import { TRPCError } from '@trpc/server';
import type { Sql } from 'postgres';
import { z } from 'zod';
import { required } from '../lib/required.js';
import { initIdemTrpc, type TenantContext } from './idemTrpc.js';
import { benchOrders } from './schema.js';

const orderInput = z.object({
  sku: z.string().min(1).max(64),
  quantity: z.number().int().positive(),
  ref: z.string().min(1).max(100),
});
type OrderInput = z.infer<typeof orderInput>;

/**
 * One mutation, seven ways: the same one-row INSERT without idem (`plain`, autocommit), the
 * same INSERT inside a plain `db.transaction` (`plainTx`: what a procedure that needs
 * transaction mode costs without idem), under idem's lease mode (claim, INSERT, fenced
 * completion), under transaction mode (claim, INSERT and completion in one transaction),
 * lease mode that waits for a busy key (`leaseWait`, for the duplicate storm), and the
 * floor under lease mode (`leaseFloor`): the statements lease mode cannot do without, a
 * claim and a completion of the key in `idem_keys` around the INSERT, sent as postgres-js
 * prepared statements through `client` with no idem code. `txFloor` is the same for
 * transaction mode: the read of the key before the transaction, then in one transaction
 * the claim, the INSERT and the completion, as raw prepared SQL on the transaction's
 * connection. Replays hit `lease` and `transaction` with completed keys.
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
      const { scope, key, fingerprint } = floorKey(ctx, path, input);
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

    txFloor: t.procedure.input(orderInput).mutation(async ({ ctx, input, path }) => {
      const { scope, key, fingerprint } = floorKey(ctx, path, input);
      // The read before the transaction: a completed key would be answered from it.
      const [existing] = await client`select status, fingerprint, outcome from idem_keys
        where scope = ${scope} and key = ${key}`;
      if (existing) throw new TRPCError({ code: 'CONFLICT', message: 'key exists' });
      return db.transaction(async (tx) => {
        const sql = connectionOf(tx);
        // The claim, in the transaction: a duplicate waits on the new row until COMMIT.
        const [claimed] = await sql`insert into idem_keys (scope, key, fingerprint, status,
            version, locked_until, attempts, steps, created_at, expires_at)
          values (${scope}, ${key}, ${fingerprint}, 'in_progress', 1,
            now() + interval '30 seconds', 1, '{}', now(), now() + interval '1 day')
          on conflict do nothing returning version, created_at`;
        if (!claimed) throw new TRPCError({ code: 'CONFLICT', message: 'key exists' });
        const result = await insertOrder(tx, ctx.principal, input);
        // The completion, fenced as transaction mode's is, committed with the INSERT.
        const completed = await sql`update idem_keys set status = 'completed',
            outcome = ${JSON.stringify({ kind: 'success', value: result })}::json,
            completed_at = now(), locked_until = null
          where scope = ${scope} and key = ${key} and version = 1
            and created_at = ${claimed.created_at} and status = 'in_progress'
          returning version`;
        if (completed.length !== 1) throw new Error('the floor lost its key');
        return result;
      });
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

/** A floor's key, scope and fingerprint, as idem would name them (no idem code). */
function floorKey(ctx: TenantContext, path: string, input: OrderInput) {
  const key = ctx.idempotencyRequest.keyOf(0);
  if (key === undefined) throw new TRPCError({ code: 'BAD_REQUEST', message: 'no key' });
  const scope = `tenant:${ctx.principal}/${path}`;
  const fingerprint = createHash('sha256').update(JSON.stringify({ path, input })).digest('hex');
  return { scope, key, fingerprint };
}

/**
 * The postgres-js connection a Drizzle transaction runs on (its session's reserved client),
 * so the floor's raw statements join the transaction the procedure's INSERT runs in.
 */
function connectionOf(tx: PgDatabaseLike): Sql {
  const session = (tx as unknown as { _: { session: { client?: Sql } } })._.session;
  if (!session.client) throw new Error('not a postgres-js transaction');
  return session.client;
}

export type BenchRouter = ReturnType<typeof createBenchRouter>;
