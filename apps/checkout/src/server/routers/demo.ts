import { idempotencyKeys } from '@idem/server';
import { and, asc, count, eq, inArray, like } from 'drizzle-orm';
import { z } from 'zod';
import { emails, eventDeliveries, orders, providerPayments } from '../db/schema';
import { publicProcedure, router } from '../trpc';

/** What the "What happened" panel shows from the server's side, and what tests assert. */
export const demoRouter = router({
  /** Everything the database holds about one checkout (one idempotency key). */
  checkout: publicProcedure
    .input(z.object({ key: z.string().min(1).max(255) }))
    .query(async ({ ctx, input }) => {
      const { db } = ctx.runtime;
      const charges = await db
        .select()
        .from(providerPayments)
        .where(eq(providerPayments.checkoutKey, input.key))
        .orderBy(asc(providerPayments.createdAt));
      const orderRows = await db
        .select()
        .from(orders)
        .where(and(eq(orders.checkoutKey, input.key), eq(orders.sessionId, ctx.sessionId)))
        .orderBy(asc(orders.createdAt));
      // The middleware stores keys under "<principal>/<procedure path>".
      const [keyRecord] = await db
        .select({
          status: idempotencyKeys.status,
          version: idempotencyKeys.version,
          attempts: idempotencyKeys.attempts,
          steps: idempotencyKeys.steps,
        })
        .from(idempotencyKeys)
        .where(
          and(
            eq(idempotencyKeys.key, input.key),
            like(idempotencyKeys.scope, `session:${ctx.sessionId}/%`),
          ),
        );
      const orderIds = orderRows.map((order) => order.id);
      const emailRows = orderIds.length
        ? await db
            .select()
            .from(emails)
            .where(inArray(emails.orderId, orderIds))
            .orderBy(asc(emails.createdAt))
        : [];
      const deliveries = orderIds.length
        ? await db
            .select({ outcome: eventDeliveries.outcome, count: count() })
            .from(eventDeliveries)
            .where(inArray(eventDeliveries.orderId, orderIds))
            .groupBy(eventDeliveries.outcome)
        : [];
      return {
        key: keyRecord
          ? {
              status: keyRecord.status,
              version: keyRecord.version,
              attempts: keyRecord.attempts,
              recoveryPoints: Object.keys(keyRecord.steps).sort(),
            }
          : null,
        charges: charges.map((charge) => ({
          id: charge.id,
          outcome: charge.outcome,
          amountCents: charge.amountCents,
          cardLast4: charge.cardLast4,
          declineCode: charge.declineCode,
          requests: charge.requests,
        })),
        orders: orderRows.map((order) => ({
          id: order.id,
          totalCents: order.totalCents,
          email: order.email,
          lines: order.lines,
          createdAt: order.createdAt,
        })),
        emails: emailRows.map((email) => ({
          id: email.id,
          recipient: email.recipient,
          subject: email.subject,
          createdAt: email.createdAt,
        })),
        deliveries: {
          processed: deliveries.find((row) => row.outcome === 'processed')?.count ?? 0,
          duplicate: deliveries.find((row) => row.outcome === 'duplicate')?.count ?? 0,
        },
      };
    }),

  /** Counts over the whole database: the demo's invariant is one of each per checkout. */
  totals: publicProcedure.query(async ({ ctx }) => {
    const { db } = ctx.runtime;
    const [charged] = await db
      .select({ count: count() })
      .from(providerPayments)
      .where(eq(providerPayments.outcome, 'charged'));
    const [orderCount] = await db.select({ count: count() }).from(orders);
    const [emailCount] = await db.select({ count: count() }).from(emails);
    return {
      charges: charged?.count ?? 0,
      orders: orderCount?.count ?? 0,
      emails: emailCount?.count ?? 0,
    };
  }),
});
