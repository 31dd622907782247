import { deriveKey } from '@idem/core';
import { eq } from 'drizzle-orm';
import { markCheckout } from './checkoutIntents';
import type { AppDatabase } from './db/openDatabase';
import { type OrderLine, orders } from './db/schema';
import { orderEvents, REDELIVER_HEADER } from './events/orderEvents';

/**
 * The key of a downstream call made to pay checkout `checkoutId` (`charge` for the
 * provider, `order` for the orders table): derived from the checkout alone, so it is the
 * same on every attempt and on either way to pay (the tRPC Pay and the plain form). Both
 * ways meet the provider's own deduplication and the order's unique key: a checkout paid
 * from both pages is still charged once and ordered once.
 */
export function checkoutCallKey(checkoutId: string, call: 'charge' | 'order'): string {
  return deriveKey('checkout', checkoutId, call);
}

export interface NewOrder {
  idempotencyKey: string;
  checkoutKey: string;
  sessionId: string;
  chargeId: string;
  email: string;
  totalCents: number;
  lines: OrderLine[];
  redeliverEvent: boolean;
}

/**
 * Writes the order and enqueues `order.paid` in ONE transaction, so the event exists
 * exactly when the order does. Only `tx` inside: PGlite has a single connection.
 */
export async function placeOrder(db: AppDatabase, order: NewOrder): Promise<{ orderId: string }> {
  return db.transaction(async (tx) => {
    const [inserted] = await tx
      .insert(orders)
      .values({
        id: crypto.randomUUID(),
        idempotencyKey: order.idempotencyKey,
        checkoutKey: order.checkoutKey,
        sessionId: order.sessionId,
        chargeId: order.chargeId,
        email: order.email,
        totalCents: order.totalCents,
        lines: order.lines,
      })
      .onConflictDoNothing({ target: orders.idempotencyKey })
      .returning({ id: orders.id });
    if (!inserted) {
      // Written by an attempt that died before saving its recovery point.
      const [existing] = await tx
        .select({ id: orders.id })
        .from(orders)
        .where(eq(orders.idempotencyKey, order.idempotencyKey));
      if (!existing) throw new Error(`order ${order.idempotencyKey}: neither inserted nor found`);
      return { orderId: existing.id };
    }
    await markCheckout(tx, order.checkoutKey, { status: 'paid', orderId: inserted.id });
    await orderEvents.enqueue(tx, {
      topic: 'order.paid',
      aggregateKey: inserted.id,
      payload: {
        orderId: inserted.id,
        checkoutKey: order.checkoutKey,
        email: order.email,
        totalCents: order.totalCents,
      },
      headers: order.redeliverEvent ? { [REDELIVER_HEADER]: '1' } : {},
    });
    return { orderId: inserted.id };
  });
}
