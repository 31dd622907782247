import { idempotent } from '@idem/server';
import type { PgDatabaseLike } from '@idem/server/postgres';
import { sql } from 'drizzle-orm';
import { z } from 'zod';
import { required } from '../lib/required.js';
import { initIdemTrpc } from '../server/idemTrpc.js';
import { chaosCharges, chaosOrders, chaosProviderCalls } from './chaosSchema.js';

const input = z.object({ businessId: z.string().min(1), amountCents: z.number().int().positive() });

/** A few ms of work after the side effect, so a SIGKILL can land between it and completion. */
const work = () => new Promise((resolve) => setTimeout(resolve, Math.random() * 10));

/**
 * The soak's procedures: `placeOrder` in transaction mode (the order row and the key's
 * completion commit together), `charge` in lease mode with a recovery point around a call
 * to a provider that deduplicates by `deriveKey('charge')`. Short lease, so that a killed
 * server's keys are taken over within the run.
 */
export function createChaosRouter(db: PgDatabaseLike, server: string) {
  const { t, scope } = initIdemTrpc();

  return t.router({
    /** Answers only when this server's pool can reach the database (after a restart: reconnected). */
    health: t.procedure.query(async () => {
      await db.execute(sql`select 1`);
      return { server, pid: process.pid };
    }),

    placeOrder: t.procedure
      .use(idempotent({ mode: 'transaction', db, scope }))
      .input(input)
      .mutation(async ({ ctx, input }) => {
        const [order] = await ctx.idempotency.tx
          .insert(chaosOrders)
          .values({ businessId: input.businessId, amountCents: input.amountCents, server })
          .returning({ id: chaosOrders.id });
        await work();
        return {
          businessId: input.businessId,
          effectId: required(order, 'the inserted order').id,
          server,
        };
      }),

    charge: t.procedure
      .use(idempotent({ db, scope, leaseMs: 2_000 }))
      .input(input)
      .mutation(async ({ ctx, input }) => {
        const providerKey = ctx.idempotency.deriveKey('charge');
        const charge = await ctx.idempotency.step('charge', async () => {
          await db.insert(chaosProviderCalls).values({ providerKey });
          // The provider's own idempotency: the same key answers with the same charge.
          const [row] = await db
            .insert(chaosCharges)
            .values({ providerKey, businessId: input.businessId, amountCents: input.amountCents })
            .onConflictDoUpdate({
              target: chaosCharges.providerKey,
              set: { providerKey: sql`excluded.provider_key` },
            })
            .returning({ id: chaosCharges.id });
          return { chargeId: required(row, 'the upserted charge').id };
        });
        await work();
        return { businessId: input.businessId, effectId: charge.chargeId, server };
      }),
  });
}

export type ChaosRouter = ReturnType<typeof createChaosRouter>;
