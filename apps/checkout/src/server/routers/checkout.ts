import { idempotent } from '@idem/server';
import { TRPCError } from '@trpc/server';
import { eq, inArray } from 'drizzle-orm';
import { z } from 'zod';
import { MAX_LINES, MAX_QUANTITY, quantitiesByProduct } from '../../cartLimits';
import {
  CartPaidElsewhereError,
  type CheckoutRow,
  findCheckoutView,
  markCheckout,
  notePayKeyScope,
  openCheckout,
  payGate,
  prepareCheckout,
  startPayment,
  toView,
} from '../checkoutIntents';
import { crashableStore } from '../crashAfterCharge';
import type { AppDatabase } from '../db/openDatabase';
import { type OrderLine, orders, products } from '../db/schema';
import { isCardDeclinedError } from '../payments/fakePaymentProvider';
import { checkoutCallKey, placeOrder } from '../placeOrder';
import { getRuntime } from '../runtime';
import { publicProcedure, router } from '../trpc';

/**
 * Short, so that "crash after charge" shows a takeover within seconds; the heartbeat
 * (every leaseMs / 3) keeps a live attempt's lease however long the provider takes.
 */
export const CHECKOUT_LEASE_MS = 2_000;

const checkoutId = z
  .string()
  .regex(/^co_[0-9a-f-]{36}$/, 'A checkout id looks like co_ followed by a UUID.');

const cartItems = z
  .array(
    z.object({
      productId: z.string().max(40, 'A product id has at most 40 characters.'),
      quantity: z
        .number()
        .int('A quantity is a whole number.')
        .min(1, 'A quantity is at least 1.')
        .max(MAX_QUANTITY, `At most ${MAX_QUANTITY} of one product per order.`),
    }),
  )
  .min(1, 'The cart is empty.')
  .max(MAX_LINES, `At most ${MAX_LINES} different products per order.`);

const CARD_NUMBER_MESSAGE = 'A card number has 12 to 19 digits (spaces between them are fine).';

export const paymentDetails = z.object({
  checkoutId,
  email: z.email('Enter an email address for the receipt.').max(200),
  cardNumber: z
    .string()
    .max(40, CARD_NUMBER_MESSAGE)
    .regex(/^(?: *[0-9]){12,19} *$/, CARD_NUMBER_MESSAGE),
  /** Server-side chaos switches, kept with the checkout like the rest of the details. */
  simulate: z
    .object({ crashAfterCharge: z.boolean(), redeliverEvent: z.boolean() })
    .default({ crashAfterCharge: false, redeliverEvent: false }),
});

export type PaymentDetailsInput = z.input<typeof paymentDetails>;

function found<T>(row: T | undefined, id: string): T {
  if (!row) {
    throw new TRPCError({
      code: 'NOT_FOUND',
      message: `No checkout ${id}: open the checkout page from the cart again.`,
    });
  }
  return row;
}

export const checkoutRouter = router({
  /**
   * The checkout of this cart version, created before Pay (like a payment intent). Safe to
   * send any number of times: the same cart version gets the same checkout.
   */
  open: publicProcedure
    .input(z.object({ cartId: z.string().regex(/^[A-Za-z0-9-]{8,64}$/), items: cartItems }))
    .mutation(async ({ ctx, input }) => {
      const lines = await priceCart(ctx.runtime.db, input.items);
      const totalCents = lines.reduce((sum, line) => sum + line.priceCents * line.quantity, 0);
      const row = await openCheckout(ctx.runtime.db, {
        sessionId: ctx.sessionId,
        cartId: input.cartId,
        lines,
        totalCents,
      });
      return toView(row);
    }),

  /** A checkout by id: any browser holding the link sees it (and may pay it). */
  get: publicProcedure
    .input(z.object({ checkoutId }))
    .query(async ({ ctx, input }) =>
      found(await findCheckoutView(ctx.runtime.db, input.checkoutId), input.checkoutId),
    ),

  /**
   * Sets the details Pay uses; returns the checkout to pay (another one after a decline with
   * other details). Setting the same details twice changes nothing, so retries are safe.
   */
  prepare: publicProcedure.input(paymentDetails).mutation(async ({ ctx, input }) => {
    const { checkoutId: id, ...details } = input;
    return toView(found(await prepareCheckout(ctx.runtime.db, id, details), id));
  }),

  pay: publicProcedure
    .input(z.object({ checkoutId }))
    // Whose payment this is, before anything is claimed: the shopper who opened the
    // checkout. A link to no checkout is refused here, and stores nothing; so is Pay while
    // another checkout of the cart is being paid, so this checkout's key stays unused.
    .use(async ({ ctx, input, next }) => {
      const gate = found(await payGate(ctx.runtime.db, input.checkoutId), input.checkoutId);
      if (gate.payingElsewhere) throw cartRefusal(gate.payingElsewhere);
      return next({ ctx: { owner: gate.owner } });
    })
    .use(
      idempotent({
        // The runtime's store once it has started (this module loads before the database
        // is open), as a "crash after charge" attempt sees it.
        store: async () => crashableStore((await getRuntime()).store),
        mode: 'lease',
        leaseMs: CHECKOUT_LEASE_MS,
        // The browser retries one checkout for up to 30 s (its retry link's deadlineMs):
        // start-up refuses a key TTL shorter than that.
        retryWindowMs: 30_000,
        // The principal is the shopper the checkout belongs to: its session, not the
        // caller's. The checkout id, made by the server and unguessable, is what lets
        // someone pay (like a payment intent's client secret): a second browser given the
        // link pays on that shopper's behalf, so it meets the same key record and replays
        // the first one's payment instead of charging again. That is safe because both
        // halves come from the checkout id: a caller reaches the record of a checkout it
        // holds the id of, and no other (a checkout's page shows as much to anyone with
        // its link).
        scope: ({ ctx }) => `session:${ctx.owner}`,
        // The key is the checkout: every tab, browser and retry that pays it sends the same
        // one, whatever key its request carries.
        key: ({ input }) => input.checkoutId,
      }),
    )
    .mutation(async ({ ctx, input }) => {
      const { idempotency, runtime } = ctx;
      // Where the panel and the server's own attempts find this payment's key record.
      await notePayKeyScope(runtime.db, input.checkoutId, idempotency.scope);
      // Freezes the details (open → paying): later edits go nowhere, retries use these.
      const checkout = found(await payable(runtime.db, input.checkoutId), input.checkoutId);
      const { email, cardNumber, totalCents, lines } = checkout;
      if (!email || !cardNumber) {
        // Released, not stored (428): the checkout can still be paid once it has details.
        throw new TRPCError({
          code: 'PRECONDITION_REQUIRED',
          message: 'Set the email and card first (checkout.prepare), then pay.',
        });
      }

      // Recovery point 1. An attempt that takes over after a crash gets the saved charge
      // here instead of calling the provider again; and the provider itself deduplicates
      // on the derived key, in case the crash came between its answer and this save.
      const charge = await idempotency.step('charge', async () => {
        try {
          return await runtime.provider.charge({
            idempotencyKey: checkoutCallKey(checkout.id, 'charge'),
            checkoutKey: idempotency.key,
            amountCents: totalCents,
            cardNumber,
          });
        } catch (error) {
          if (!isCardDeclinedError(error)) throw error;
          await markCheckout(runtime.db, checkout.id, { status: 'declined' });
          // A business "no": stored with the key and replayed to every retry.
          throw new TRPCError({ code: 'PAYMENT_REQUIRED', message: error.message, cause: error });
        }
      });

      if (checkout.crashAfterCharge && !idempotency.takeover) {
        await ctx.crash.crash(idempotency);
      }

      // Recovery point 2: the order, its order.paid event and the paid checkout, in one
      // transaction.
      const order = await idempotency.step('order', () =>
        placeOrder(runtime.db, {
          idempotencyKey: checkoutCallKey(checkout.id, 'order'),
          checkoutKey: idempotency.key,
          sessionId: ctx.sessionId,
          chargeId: charge.chargeId,
          email,
          totalCents,
          lines,
          redeliverEvent: checkout.redeliverEvent,
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

  /** An order by id, for its page in any browser: the order id is the link's secret. */
  order: publicProcedure
    .input(
      z.object({ orderId: z.uuid('An order id looks like 42fb7197-d307-4269-aac1-7d669d617c65.') }),
    )
    .query(async ({ ctx, input }) => {
      const [order] = await ctx.runtime.db
        .select({
          id: orders.id,
          checkoutKey: orders.checkoutKey,
          email: orders.email,
          totalCents: orders.totalCents,
          lines: orders.lines,
          createdAt: orders.createdAt,
        })
        .from(orders)
        .where(eq(orders.id, input.orderId));
      return order ?? null;
    }),
});

/**
 * `startPayment`, with a cart paid through another checkout as tRPC's answer: stored with
 * the key when that payment is done (this checkout can never be paid), released while it
 * is under way (it may still be declined, and this checkout paid after all).
 */
async function payable(db: AppDatabase, id: string): Promise<CheckoutRow | undefined> {
  try {
    return await startPayment(db, id);
  } catch (error) {
    if (!(error instanceof CartPaidElsewhereError)) throw error;
    throw cartRefusal(error);
  }
}

/** A cart paid (stored with the key: 409) or being paid (released: 428) through another checkout. */
function cartRefusal(error: CartPaidElsewhereError): TRPCError {
  return new TRPCError({
    code: error.status === 'paid' ? 'CONFLICT' : 'PRECONDITION_REQUIRED',
    message: error.message,
    cause: error,
  });
}

async function priceCart(db: AppDatabase, items: z.infer<typeof cartItems>): Promise<OrderLine[]> {
  // One line per product: two lines of one product count together against the limit.
  const quantities = quantitiesByProduct(items);
  for (const quantity of quantities.values()) {
    if (quantity > MAX_QUANTITY) {
      throw new TRPCError({
        code: 'BAD_REQUEST',
        message: `At most ${MAX_QUANTITY} of one product per order.`,
      });
    }
  }
  const merged = [...quantities].map(([productId, quantity]) => ({ productId, quantity }));
  const ids = [...quantities.keys()];
  const found = await db.select().from(products).where(inArray(products.id, ids));
  const byId = new Map(found.map((product) => [product.id, product]));
  return merged.map((item) => {
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
