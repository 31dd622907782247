import { createHash } from 'node:crypto';
import { and, asc, desc, eq, isNull, ne, sql } from 'drizzle-orm';
import { quantitiesByProduct } from '../cartLimits';
import type { AppDatabase } from './db/openDatabase';
import { type CheckoutStatus, checkouts, type OrderLine } from './db/schema';

export type CheckoutRow = typeof checkouts.$inferSelect;

/** What a browser may see of a checkout: whoever holds its id may pay it. */
export interface CheckoutView {
  id: string;
  /** The browser cart it was opened for: that browser empties its cart once it is paid. */
  cartId: string;
  status: CheckoutStatus;
  lines: OrderLine[];
  totalCents: number;
  orderId: string | null;
  email: string | null;
  cardLast4: string | null;
  simulate: { crashAfterCharge: boolean; redeliverEvent: boolean };
  /**
   * Another checkout of the same cart that is paid or being paid (Back to an older cart
   * version, another tab): a cart is paid once, so this one can no longer be.
   */
  otherPayment: { checkoutId: string; status: 'paying' | 'paid'; orderId: string | null } | null;
}

export interface PaymentDetails {
  email: string;
  cardNumber: string;
  simulate: { crashAfterCharge: boolean; redeliverEvent: boolean };
}

export function toView(row: CheckoutRow): CheckoutView {
  return {
    id: row.id,
    cartId: row.cartId,
    status: row.status,
    lines: row.lines,
    totalCents: row.totalCents,
    orderId: row.orderId,
    email: row.email,
    cardLast4: row.cardNumber ? row.cardNumber.replace(/\D/g, '').slice(-4) : null,
    simulate: { crashAfterCharge: row.crashAfterCharge, redeliverEvent: row.redeliverEvent },
    otherPayment: null,
  };
}

/**
 * Every checkout of the cart that checkout `id` was opened for, itself included, in id
 * order, in one statement; with `lock`, locked for update in that order.
 */
function cartCheckouts(db: Pick<AppDatabase, 'select'>, id: string, lock: boolean) {
  const query = db
    .select()
    .from(checkouts)
    .where(
      sql`(${checkouts.sessionId}, ${checkouts.cartId}) = (select session_id, cart_id from ${checkouts} where id = ${id})`,
    )
    .orderBy(asc(checkouts.id));
  return lock ? query.for('update') : query;
}

/** Of a cart's checkouts, one other than `id` that is paid or being paid. */
function otherPaymentIn(cart: readonly CheckoutRow[], id: string) {
  const other = cart.find(
    (row) => row.id !== id && (row.status === 'paying' || row.status === 'paid'),
  );
  return other && { ...other, status: other.status as 'paying' | 'paid' };
}

/** A checkout as its page shows it, with the cart's other payment if there is one. */
export async function findCheckoutView(
  db: AppDatabase,
  id: string,
): Promise<CheckoutView | undefined> {
  const cart = await cartCheckouts(db, id, false);
  const row = cart.find((checkout) => checkout.id === id);
  if (!row) return undefined;
  const other = otherPaymentIn(cart, id);
  return {
    ...toView(row),
    otherPayment: other
      ? { checkoutId: other.id, status: other.status, orderId: other.orderId }
      : null,
  };
}

/** Pay refused: another checkout of the same cart is paid, or being paid. */
export class CartPaidElsewhereError extends Error {
  constructor(
    readonly checkoutId: string,
    readonly status: 'paying' | 'paid',
  ) {
    super(
      status === 'paid'
        ? `This cart was already paid with another checkout (${checkoutId}); nothing more is charged. Open the checkout from the cart for anything left in it.`
        : `Another checkout of this cart (${checkoutId}) is being paid; a cart is paid once. Open that checkout to follow it.`,
    );
    this.name = 'CartPaidElsewhereError';
  }
}

/** The same lines in any order, or split over two entries, are the same cart version. */
function cartHash(lines: readonly OrderLine[]): string {
  const canonical = [...quantitiesByProduct(lines)].sort(([a], [b]) =>
    a < b ? -1 : a > b ? 1 : 0,
  );
  return createHash('sha256').update(JSON.stringify(canonical)).digest('hex');
}

export async function findCheckout(db: AppDatabase, id: string): Promise<CheckoutRow | undefined> {
  const [row] = await db.select().from(checkouts).where(eq(checkouts.id, id));
  return row;
}

/**
 * The cart version's live checkout (open, being paid or paid), created if there is none:
 * one INSERT … ON CONFLICT DO NOTHING on the partial unique index, then a read, so two
 * tabs opening one cart at once meet on one row and never check-then-insert.
 */
export async function openCheckout(
  db: AppDatabase,
  cart: { sessionId: string; cartId: string; lines: OrderLine[]; totalCents: number },
  details?: PaymentDetails,
): Promise<CheckoutRow> {
  const hash = cartHash(cart.lines);
  await db
    .insert(checkouts)
    .values({
      id: `co_${crypto.randomUUID()}`,
      sessionId: cart.sessionId,
      cartId: cart.cartId,
      cartHash: hash,
      lines: cart.lines,
      totalCents: cart.totalCents,
      ...(details && detailColumns(details)),
    })
    .onConflictDoNothing({
      target: [checkouts.sessionId, checkouts.cartId, checkouts.cartHash],
      where: sql`status <> 'declined'`,
    });
  const [live] = await db
    .select()
    .from(checkouts)
    .where(
      and(
        eq(checkouts.sessionId, cart.sessionId),
        eq(checkouts.cartId, cart.cartId),
        eq(checkouts.cartHash, hash),
        ne(checkouts.status, 'declined'),
      ),
    )
    .orderBy(desc(checkouts.createdAt))
    .limit(1);
  if (!live) throw new Error('the checkout just written is gone');
  return live;
}

/**
 * Sets the payment details Pay will use. Once a payment started they are frozen, and the
 * checkout comes back as it is: Pay then replays (or completes) that one payment. After a
 * decline, other details are another attempt, so they go to a new checkout of the same
 * cart; the same details keep the declined one, whose stored decline Pay replays.
 */
export async function prepareCheckout(
  db: AppDatabase,
  id: string,
  details: PaymentDetails,
): Promise<CheckoutRow | undefined> {
  const [updated] = await db
    .update(checkouts)
    .set(detailColumns(details))
    .where(and(eq(checkouts.id, id), eq(checkouts.status, 'open')))
    .returning();
  if (updated) return updated;
  const current = await findCheckout(db, id);
  if (current?.status !== 'declined' || sameDetails(current, details)) return current;
  const next = await openCheckout(db, current, details);
  // Another request may have opened it first, without these details: set them now.
  return prepareCheckout(db, next.id, details);
}

/**
 * The payment starts: the details are frozen (open → paying); returns the checkout as paid.
 * A cart is paid once: every checkout of the cart is locked, in id order (so two starting at
 * once take turns, never deadlock), and if another one is paid or being paid, this one
 * does not start (`CartPaidElsewhereError`). An older cart version (Back) or a second tab's
 * checkout would otherwise charge the same items again.
 */
export async function startPayment(db: AppDatabase, id: string): Promise<CheckoutRow | undefined> {
  return db.transaction(async (tx) => {
    const cart = await cartCheckouts(tx, id, true);
    const target = cart.find((checkout) => checkout.id === id);
    if (target?.status !== 'open') return target;
    const other = otherPaymentIn(cart, id);
    if (other) throw new CartPaidElsewhereError(other.id, other.status);
    // No details yet: Pay refuses it (428) and it stays open for `checkout.prepare`.
    if (!target.email || !target.cardNumber) return target;
    // Locked and open: this update is the one that starts the payment.
    const [frozen] = await tx
      .update(checkouts)
      .set({ status: 'paying' })
      .where(eq(checkouts.id, id))
      .returning();
    return frozen;
  });
}

/**
 * What Pay reads before it claims a key, in one statement: the shopper the checkout belongs
 * to (the browser session that opened it: its payment is that shopper's, whichever browser
 * holds the link and presses Pay), and, while it is open, another checkout of its cart
 * being paid (`CartPaidElsewhereError`), which refuses Pay without a key. `startPayment`'s
 * lock still decides a race.
 */
export async function payGate(
  db: AppDatabase,
  id: string,
): Promise<{ owner: string; payingElsewhere: CartPaidElsewhereError | undefined } | undefined> {
  const cart = await cartCheckouts(db, id, false);
  const row = cart.find((checkout) => checkout.id === id);
  if (!row) return undefined;
  const other = row.status === 'open' ? otherPaymentIn(cart, id) : undefined;
  return {
    owner: row.sessionId,
    payingElsewhere:
      other?.status === 'paying' ? new CartPaidElsewhereError(other.id, 'paying') : undefined,
  };
}

/** Notes the scope idem keeps the checkout's Pay key under (once: it never changes). */
export async function notePayKeyScope(db: AppDatabase, id: string, scope: string): Promise<void> {
  await db
    .update(checkouts)
    .set({ payKeyScope: scope })
    .where(and(eq(checkouts.id, id), isNull(checkouts.payKeyScope)));
}

export async function markCheckout(
  db: Pick<AppDatabase, 'update'>,
  id: string,
  change: { status: 'paid'; orderId: string } | { status: 'declined' },
): Promise<void> {
  await db.update(checkouts).set(change).where(eq(checkouts.id, id));
}

function detailColumns(details: PaymentDetails) {
  return {
    email: details.email,
    cardNumber: details.cardNumber,
    crashAfterCharge: details.simulate.crashAfterCharge,
    redeliverEvent: details.simulate.redeliverEvent,
  };
}

function sameDetails(row: CheckoutRow, details: PaymentDetails): boolean {
  return (
    row.email === details.email &&
    row.cardNumber?.replace(/\D/g, '') === details.cardNumber.replace(/\D/g, '') &&
    row.crashAfterCharge === details.simulate.crashAfterCharge &&
    row.redeliverEvent === details.simulate.redeliverEvent
  );
}
