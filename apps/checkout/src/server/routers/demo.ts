import { idempotencyKeys } from '@idem/server/postgres';
import { asc, count, eq, inArray } from 'drizzle-orm';
import { z } from 'zod';
import {
  checkouts,
  emails,
  eventDeliveries,
  orders,
  paymentConfirmations,
  providerPayments,
  webhookDeliveries,
} from '../db/schema';
import { publicProcedure, router } from '../trpc';

/** What the "What happened" panel shows from the server's side, and what tests assert. */
export const demoRouter = router({
  /**
   * Everything the database holds about one checkout (its id is Pay's idempotency key),
   * for any browser that has the link: like the checkout, it is not tied to one session.
   */
  checkout: publicProcedure
    .input(
      z.object({
        key: z.string().regex(/^[\x20-\x7e]{1,255}$/, 'A key is 1–255 printable ASCII characters.'),
      }),
    )
    .query(async ({ ctx, input }) => {
      const { db, store } = ctx.runtime;
      const charges = await db
        .select()
        .from(providerPayments)
        .where(eq(providerPayments.checkoutKey, input.key))
        .orderBy(asc(providerPayments.createdAt));
      const orderRows = await db
        .select()
        .from(orders)
        .where(eq(orders.checkoutKey, input.key))
        .orderBy(asc(orders.createdAt));
      // Pay's key record, through the store, under the scope Pay noted on the checkout.
      const [checkout] = await db
        .select({ payKeyScope: checkouts.payKeyScope })
        .from(checkouts)
        .where(eq(checkouts.id, input.key));
      const keyRecord = checkout?.payKeyScope
        ? await store.get(checkout.payKeyScope, input.key)
        : null;
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
      // The provider's payment webhooks for this checkout: what the shop's receiver did
      // (one confirmation per event) and every delivery the provider made.
      const confirmations = await db
        .select({ eventId: paymentConfirmations.eventId })
        .from(paymentConfirmations)
        .where(eq(paymentConfirmations.checkoutKey, input.key));
      const webhookPosts = await db
        .select({ status: webhookDeliveries.status, replayed: webhookDeliveries.replayed })
        .from(webhookDeliveries)
        .where(eq(webhookDeliveries.checkoutKey, input.key))
        .orderBy(asc(webhookDeliveries.id));
      return {
        webhooks: {
          confirmations: confirmations.length,
          events: new Set(confirmations.map((row) => row.eventId)).size,
          deliveries: webhookPosts.length,
          replayed: webhookPosts.filter((post) => post.replayed).length,
        },
        key: keyRecord
          ? {
              status: keyRecord.status,
              // In progress with its lease over: released (a refusal), or its holder died.
              leaseEnded:
                keyRecord.status === 'in_progress' && (keyRecord.lockedUntil ?? 0) <= Date.now(),
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
    // A key still in progress belongs to a payment under way, or to an attempt that died:
    // the next attempt takes it over once its lease has passed. Every key, the webhook's
    // too, counted through the table idem exports for queries (`idempotencyKeys`) by its
    // status alone: the store reads one key, and counts none.
    const [inProgress] = await db
      .select({ count: count() })
      .from(idempotencyKeys)
      .where(eq(idempotencyKeys.status, 'in_progress'));
    return {
      charges: charged?.count ?? 0,
      orders: orderCount?.count ?? 0,
      emails: emailCount?.count ?? 0,
      keysInProgress: inProgress?.count ?? 0,
    };
  }),
});
