import type { HandlerContext } from '@idem/core';
import { and, eq, inArray } from 'drizzle-orm';
import { z } from 'zod';
import { MAX_LINES, MAX_QUANTITY } from '../cartLimits';
import {
  CartPaidElsewhereError,
  markCheckout,
  notePayKeyScope,
  openCheckout,
  startPayment,
} from './checkoutIntents';
import type { AppDatabase } from './db/openDatabase';
import { checkouts, type OrderLine, products } from './db/schema';
import { isCardDeclinedError } from './payments/fakePaymentProvider';
import { checkoutCallKey, placeOrder } from './placeOrder';
import type { Runtime } from './runtime';

/**
 * The "kill the server after the charge" switch: a real SIGKILL of the process, offered only
 * when the server runs with `DEMO_KILL_SWITCH=1` (the browser tests' own server).
 */
export const KILL_FIELD = 'kill-after-charge';
export const killSwitchEnabled = () => process.env.DEMO_KILL_SWITCH === '1';

const CARD_NUMBER_MESSAGE = 'A card number has 12 to 19 digits (spaces between them are fine).';

/** What the pay form sends besides its key: checked before the key is claimed. */
export const plainPaymentForm = z.object({
  email: z.email('Enter an email address for the receipt.').max(200),
  cardNumber: z
    .string()
    .max(40, CARD_NUMBER_MESSAGE)
    .regex(/^(?: *[0-9]){12,19} *$/, CARD_NUMBER_MESSAGE),
});

/** What the pay form shows after a submission: `useActionState`'s state. */
export type PlainPayState =
  | { status: 'idle' }
  | { status: 'invalid'; message: string }
  | {
      status: 'paid';
      checkoutId: string;
      orderId: string;
      chargeId: string;
      totalCents: number;
      cardLast4: string;
      email: string;
      lines: OrderLine[];
      /** Which attempt of the key ran it: 1, or 2 and more after a takeover. */
      attempt: number;
    }
  | { status: 'declined'; checkoutId: string; message: string }
  | { status: 'paid-elsewhere'; checkoutId: string; otherCheckoutId: string; message: string }
  | { status: 'refused'; code: string; message: string };

/**
 * A state, with the request that ran the payment (`executedBy`, stored with it) and the one
 * that answered (`answer`): a replay is answered by another request than the one that ran.
 */
export type PlainPayAnswer = PlainPayState & {
  executedBy?: string;
  answer?: { requestId: string; replayed: boolean };
};

/** The other checkout of the cart is being paid: released (not stored), this one may still pay. */
export class CartBeingPaidError extends Error {
  override readonly name = 'CartBeingPaidError';
}

/**
 * Pays checkout `checkoutId` under the key idem claimed for it: the same charge and order
 * as the tRPC Pay (the same recovery points, and downstream keys derived from the checkout,
 * so a checkout paid from both pages is still charged once). `details` go on the checkout
 * while it is open; once a payment started, its details are the ones it pays with.
 */
export async function payPlainCheckout(
  runtime: Runtime,
  idempotency: HandlerContext,
  payment: {
    checkoutId: string;
    details: z.infer<typeof plainPaymentForm>;
    kill: boolean;
  },
): Promise<PlainPayState> {
  const { db, provider } = runtime;
  const { checkoutId } = payment;
  // Where the panel and the server's own attempts find this payment's key record (the
  // first way to pay a checkout notes its scope; the other keeps its own record).
  await notePayKeyScope(db, checkoutId, idempotency.scope);
  await db
    .update(checkouts)
    .set({ email: payment.details.email, cardNumber: payment.details.cardNumber })
    .where(and(eq(checkouts.id, checkoutId), eq(checkouts.status, 'open')));
  const checkout = await startPaymentOrState(db, checkoutId);
  if ('otherCheckoutId' in checkout) return checkout;
  const { email, cardNumber, totalCents, lines } = checkout;
  if (!email || !cardNumber) throw new Error(`checkout ${checkoutId} has no payment details`);

  // Recovery point 1: after a crash, the next attempt gets the charge saved here; the
  // provider deduplicates on the checkout's charge key in case the crash came before.
  const charged = await idempotency.step('charge', async () => {
    try {
      const charge = await provider.charge({
        idempotencyKey: checkoutCallKey(checkoutId, 'charge'),
        checkoutKey: checkoutId,
        amountCents: totalCents,
        cardNumber,
      });
      return { ok: true as const, charge };
    } catch (error) {
      if (!isCardDeclinedError(error)) throw error;
      await markCheckout(db, checkoutId, { status: 'declined' });
      return { ok: false as const, message: error.message };
    }
  });
  if (!charged.ok) return { status: 'declined', checkoutId, message: charged.message };

  if (payment.kill && killSwitchEnabled() && !idempotency.takeover) {
    // The chaos switch: the process dies here, charged, with no order and the key in progress.
    process.kill(process.pid, 'SIGKILL');
  }

  // Recovery point 2: the order, its order.paid event and the paid checkout, in one transaction.
  const order = await idempotency.step('order', () =>
    placeOrder(db, {
      idempotencyKey: checkoutCallKey(checkoutId, 'order'),
      checkoutKey: checkoutId,
      sessionId: checkout.sessionId,
      chargeId: charged.charge.chargeId,
      email,
      totalCents,
      lines,
      redeliverEvent: false,
    }),
  );
  return {
    status: 'paid',
    checkoutId,
    orderId: order.orderId,
    chargeId: charged.charge.chargeId,
    totalCents,
    cardLast4: charged.charge.cardLast4,
    email,
    lines,
    attempt: idempotency.attempt,
  };
}

/** `startPayment`, with a cart paid through another checkout as the form's answer. */
async function startPaymentOrState(db: AppDatabase, checkoutId: string) {
  try {
    const checkout = await startPayment(db, checkoutId);
    if (!checkout) throw new Error(`checkout ${checkoutId} is gone`);
    return checkout;
  } catch (error) {
    if (!(error instanceof CartPaidElsewhereError)) throw error;
    // Being paid elsewhere: released, so a submit once that one is declined may pay here.
    if (error.status === 'paying') throw new CartBeingPaidError(error.message, { cause: error });
    return {
      status: 'paid-elsewhere' as const,
      checkoutId,
      otherCheckoutId: error.checkoutId,
      message: error.message,
    };
  }
}

/**
 * The checkout of the plain cart `quantities` (product id → how many), for the session and
 * cart in the browser's cookies: one per cart version, as the JavaScript checkout opens
 * (`openCheckout`), so two tabs that pick the same products get the same checkout. A cart
 * already paid gets a new cart id (returned), so buying the same again is a new checkout.
 */
export async function openPlainCheckout(
  db: AppDatabase,
  cart: { sessionId: string; cartId: string; quantities: Map<string, number> },
): Promise<{ checkoutId: string; cartId: string }> {
  const lines = await priceLines(db, cart.quantities);
  const totalCents = lines.reduce((sum, line) => sum + line.priceCents * line.quantity, 0);
  let { cartId } = cart;
  for (;;) {
    const row = await openCheckout(db, { sessionId: cart.sessionId, cartId, lines, totalCents });
    if (row.status !== 'paid') return { checkoutId: row.id, cartId };
    cartId = `plain-${crypto.randomUUID()}`;
  }
}

/** What the plain cart page says when its form was refused (`?problem=<code>`). */
export const PLAIN_CART_PROBLEMS = {
  empty: 'Choose at least one product.',
  quantity: `A quantity is a whole number from 0 to ${MAX_QUANTITY}.`,
  lines: `At most ${MAX_LINES} different products per order.`,
  product: 'That product is not sold here: choose from the list.',
  cookies: 'Your browser sent no session cookie: allow cookies for this shop and try again.',
} as const;

export type PlainCartProblem = keyof typeof PLAIN_CART_PROBLEMS;

/** Quantities from the plain cart form (`qty-<product id>` fields), or what is wrong with them. */
export function quantitiesOf(form: FormData): Map<string, number> | PlainCartProblem {
  const quantities = new Map<string, number>();
  for (const [name, value] of form.entries()) {
    if (!name.startsWith('qty-') || typeof value !== 'string' || value.trim() === '') continue;
    const quantity = Number(value);
    if (!Number.isInteger(quantity) || quantity < 0 || quantity > MAX_QUANTITY) {
      return 'quantity';
    }
    if (quantity > 0) quantities.set(name.slice('qty-'.length), quantity);
  }
  if (quantities.size === 0) return 'empty';
  if (quantities.size > MAX_LINES) return 'lines';
  return quantities;
}

async function priceLines(db: AppDatabase, quantities: Map<string, number>): Promise<OrderLine[]> {
  const ids = [...quantities.keys()];
  const found = await db.select().from(products).where(inArray(products.id, ids));
  return ids.map((id) => {
    const product = found.find((row) => row.id === id);
    if (!product) throw new UnknownProductError(id);
    return {
      productId: id,
      name: product.name,
      quantity: quantities.get(id) ?? 0,
      priceCents: product.priceCents,
    };
  });
}

/** The plain cart form named a product the shop does not sell. */
export class UnknownProductError extends Error {
  override readonly name = 'UnknownProductError';
  constructor(readonly productId: string) {
    super(`Unknown product "${productId}": choose from the list.`);
  }
}
