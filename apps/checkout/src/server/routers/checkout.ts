import type { IdempotencyStore } from '@idem/core';
import { idempotent } from '@idem/server';
import { TRPCError } from '@trpc/server';
import { eq, inArray } from 'drizzle-orm';
import { z } from 'zod';
import { crashableStore } from '../crashAfterCharge';
import type { AppDatabase } from '../db/openDatabase';
import { type OrderLine, orders, products } from '../db/schema';
import { orderEvents, REDELIVER_HEADER } from '../events/orderEvents';
import { isCardDeclinedError } from '../payments/fakePaymentProvider';
import { getRuntime } from '../runtime';
import { publicProcedure, router } from '../trpc';

/**
 * Short, so that "crash after charge" shows a takeover within seconds; the heartbeat
 * (every leaseMs / 3) keeps a live attempt's lease however long the provider takes.
 */
export const CHECKOUT_LEASE_MS = 2_000;

/** The idempotency store, reached once the runtime (and its database) has started. */
const store: IdempotencyStore = crashableStore({
  claim: async (request) => (await getRuntime()).store.claim(request),
  complete: async (token, outcome, ttlMs) =>
    (await getRuntime()).store.complete(token, outcome, ttlMs),
  release: async (token) => (await getRuntime()).store.release(token),
  heartbeat: async (token, leaseMs) => (await getRuntime()).store.heartbeat(token, leaseMs),
  saveStep: async (token, name, value) => (await getRuntime()).store.saveStep(token, name, value),
  get: async (scope, key) => (await getRuntime()).store.get(scope, key),
  sweep: async (options) => (await getRuntime()).store.sweep(options),
});

/** Mutations that run once per idempotency key and replay their outcome afterwards. */
const keyedProcedure = publicProcedure.use(
  idempotent({
    store,
    mode: 'lease',
    leaseMs: CHECKOUT_LEASE_MS,
    // The browser retries one checkout for up to 30 s (keyedRetryLink's deadlineMs):
    // start-up refuses a key TTL shorter than that.
    retryWindowMs: 30_000,
    // Keys are per shopper: another session's key never replays this one's response.
    scope: ({ ctx }) => `session:${ctx.sessionId}`,
  }),
);

export const checkoutInput = z.object({
  items: z
    .array(z.object({ productId: z.string().max(40), quantity: z.number().int().min(1).max(20) }))
    .min(1, 'The cart is empty.')
    .max(20),
  email: z.email('Enter an email address for the receipt.').max(200),
  cardNumber: z.string().regex(/^[0-9 ]{12,23}$/, 'A card number has 12 to 19 digits.'),
  /** Server-side chaos switches (part of the request, so every retry carries them). */
  simulate: z
    .object({ crashAfterCharge: z.boolean(), redeliverEvent: z.boolean() })
    .default({ crashAfterCharge: false, redeliverEvent: false }),
});

export type CheckoutInput = z.input<typeof checkoutInput>;

export const checkoutRouter = router({
  pay: keyedProcedure.input(checkoutInput).mutation(async ({ ctx, input }) => {
    const { idempotency, runtime } = ctx;
    const lines = await priceCart(runtime.db, input.items);
    const totalCents = lines.reduce((sum, line) => sum + line.priceCents * line.quantity, 0);

    // Recovery point 1. An attempt that takes over after a crash gets the saved charge
    // here instead of calling the provider again; and the provider itself deduplicates
    // on the derived key, in case the crash came between its answer and this save.
    const charge = await idempotency.step('charge', async () => {
      try {
        return await runtime.provider.charge({
          idempotencyKey: idempotency.deriveKey('charge'),
          checkoutKey: idempotency.key,
          amountCents: totalCents,
          cardNumber: input.cardNumber,
        });
      } catch (error) {
        if (!isCardDeclinedError(error)) throw error;
        // A business "no": stored with the key and replayed to every retry.
        throw new TRPCError({ code: 'PAYMENT_REQUIRED', message: error.message, cause: error });
      }
    });

    if (input.simulate.crashAfterCharge && !idempotency.takeover) {
      await ctx.crash.crash(idempotency);
    }

    // Recovery point 2: the order and its order.paid event, in one transaction.
    const order = await idempotency.step('order', () =>
      placeOrder(runtime.db, {
        idempotencyKey: idempotency.deriveKey('order'),
        checkoutKey: idempotency.key,
        sessionId: ctx.sessionId,
        chargeId: charge.chargeId,
        email: input.email,
        totalCents,
        lines,
        redeliverEvent: input.simulate.redeliverEvent,
      }),
    );

    return {
      checkoutKey: idempotency.key,
      orderId: order.orderId,
      chargeId: charge.chargeId,
      totalCents,
      cardLast4: charge.cardLast4,
      /** Which server attempt did the work: 1, or 2+ after a takeover. */
      executedByAttempt: idempotency.attempt,
    };
  }),
});

async function priceCart(db: AppDatabase, items: CheckoutInput['items']): Promise<OrderLine[]> {
  const ids = [...new Set(items.map((item) => item.productId))];
  const found = await db.select().from(products).where(inArray(products.id, ids));
  const byId = new Map(found.map((product) => [product.id, product]));
  return items.map((item) => {
    const product = byId.get(item.productId);
    if (!product) {
      throw new TRPCError({ code: 'BAD_REQUEST', message: `Unknown product "${item.productId}".` });
    }
    return {
      productId: product.id,
      name: product.name,
      quantity: item.quantity,
      priceCents: product.priceCents,
    };
  });
}

interface NewOrder {
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
async function placeOrder(db: AppDatabase, order: NewOrder): Promise<{ orderId: string }> {
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
      return { orderId: existing!.id };
    }
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
