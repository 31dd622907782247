import { sql } from 'drizzle-orm';
import {
  boolean,
  check,
  index,
  integer,
  jsonb,
  pgTable,
  serial,
  text,
  timestamp,
  uniqueIndex,
} from 'drizzle-orm/pg-core';

// The shop's own tables: `migrateApp` creates them as declared here, checks and indexes too.

/** When the row was written: every table but the catalogue notes it. */
const createdAt = () => timestamp('created_at', { withTimezone: true }).notNull().defaultNow();

/** The shop's catalogue, seeded by `migrateApp`. */
export const products = pgTable('products', {
  id: text('id').primaryKey(),
  name: text('name').notNull(),
  description: text('description').notNull(),
  priceCents: integer('price_cents').notNull(),
  /** A CSS colour for the product's swatch (no images or emoji fonts needed). */
  color: text('color').notNull(),
});

export interface OrderLine {
  productId: string;
  name: string;
  quantity: number;
  priceCents: number;
}

export type CheckoutStatus = 'open' | 'paying' | 'paid' | 'declined';

/**
 * A checkout: the intent to pay one version of one cart, created on the server before Pay
 * (like a payment intent). Pay is keyed by its id, so every tab, browser and retry that
 * pays it shares one idempotency key. One live checkout per cart version (a partial unique
 * index): a declined one makes room for the next attempt with another card.
 */
export const checkouts = pgTable(
  'checkouts',
  {
    id: text('id').primaryKey(),
    sessionId: text('session_id').notNull(),
    /** The browser's cart (an intent key kept in localStorage) and a hash of its lines. */
    cartId: text('cart_id').notNull(),
    cartHash: text('cart_hash').notNull(),
    lines: jsonb('lines').$type<OrderLine[]>().notNull(),
    totalCents: integer('total_cents').notNull(),
    /** The payment details, set before Pay and frozen once a payment starts ('paying'). */
    email: text('email'),
    cardNumber: text('card_number'),
    crashAfterCharge: boolean('crash_after_charge').notNull().default(false),
    redeliverEvent: boolean('redeliver_event').notNull().default(false),
    status: text('status').$type<CheckoutStatus>().notNull().default('open'),
    orderId: text('order_id'),
    /**
     * The scope idem stores this checkout's Pay key under, as the middleware named it
     * (`ctx.idempotency.scope`), noted by Pay's first attempt: the key is the checkout's id,
     * so scope and id find the key record through the store (`store.get`).
     */
    payKeyScope: text('pay_key_scope'),
    createdAt: createdAt(),
  },
  (table) => [
    check('checkouts_status_check', sql`status in ('open', 'paying', 'paid', 'declined')`),
    // One live checkout per cart version: two tabs opening the same cart meet on one row.
    uniqueIndex('checkouts_live_cart_idx')
      .on(table.sessionId, table.cartId, table.cartHash)
      .where(sql`status <> 'declined'`),
  ],
);

/** One row per paid checkout. `idempotency_key` (derived from the checkout's key) is unique. */
export const orders = pgTable(
  'orders',
  {
    id: text('id').primaryKey(),
    idempotencyKey: text('idempotency_key').notNull().unique(),
    checkoutKey: text('checkout_key').notNull(),
    sessionId: text('session_id').notNull(),
    chargeId: text('charge_id').notNull(),
    email: text('email').notNull(),
    totalCents: integer('total_cents').notNull(),
    lines: jsonb('lines').$type<OrderLine[]>().notNull(),
    createdAt: createdAt(),
  },
  (table) => [index('orders_checkout_key_idx').on(table.checkoutKey)],
);

/**
 * The fake payment provider's ledger (it would live at Stripe & co.). One row per
 * provider idempotency key: `requests` counts how often it was asked, `outcome` what it
 * answered every time.
 */
export const providerPayments = pgTable(
  'provider_payments',
  {
    id: text('id').primaryKey(),
    idempotencyKey: text('idempotency_key').notNull().unique(),
    /** Metadata the shop attached, as a real provider allows: which checkout this was. */
    checkoutKey: text('checkout_key').notNull(),
    amountCents: integer('amount_cents').notNull(),
    cardLast4: text('card_last4').notNull(),
    outcome: text('outcome').$type<'charged' | 'declined'>().notNull(),
    declineCode: text('decline_code'),
    requests: integer('requests').notNull().default(1),
    createdAt: createdAt(),
  },
  (table) => [
    check('provider_payments_outcome_check', sql`outcome in ('charged', 'declined')`),
    index('provider_payments_checkout_key_idx').on(table.checkoutKey),
  ],
);

/**
 * Confirmation emails "sent" by the order.paid consumer. Deliberately no unique
 * constraint on the order: exactly one per order is the inbox's doing, not the schema's.
 */
export const emails = pgTable(
  'emails',
  {
    id: serial('id').primaryKey(),
    orderId: text('order_id').notNull(),
    eventId: text('event_id').notNull(),
    recipient: text('recipient').notNull(),
    subject: text('subject').notNull(),
    createdAt: createdAt(),
  },
  (table) => [index('emails_order_id_idx').on(table.orderId)],
);

/** Every delivery of an event to the email consumer, duplicates included. */
export const eventDeliveries = pgTable(
  'event_deliveries',
  {
    id: serial('id').primaryKey(),
    eventId: text('event_id').notNull(),
    orderId: text('order_id').notNull(),
    outcome: text('outcome').$type<'processed' | 'duplicate'>().notNull(),
    createdAt: createdAt(),
  },
  (table) => [index('event_deliveries_order_id_idx').on(table.orderId)],
);

/**
 * What the shop's payment webhook receiver did with each `payment.succeeded` event it
 * handled. Deliberately no unique constraint on the event: one row per event, however
 * often the provider delivers it, is idem's doing (the event id is the key).
 */
export const paymentConfirmations = pgTable(
  'payment_confirmations',
  {
    id: serial('id').primaryKey(),
    eventId: text('event_id').notNull(),
    checkoutKey: text('checkout_key').notNull(),
    chargeId: text('charge_id').notNull(),
    amountCents: integer('amount_cents').notNull(),
    createdAt: createdAt(),
  },
  (table) => [index('payment_confirmations_checkout_key_idx').on(table.checkoutKey)],
);

/**
 * The fake provider's log of webhook deliveries (it would live at the provider): every
 * POST it made, what status came back, and whether the shop answered it from the store.
 */
export const webhookDeliveries = pgTable(
  'webhook_deliveries',
  {
    id: serial('id').primaryKey(),
    eventId: text('event_id').notNull(),
    checkoutKey: text('checkout_key').notNull(),
    status: integer('status').notNull(),
    replayed: boolean('replayed').notNull(),
    createdAt: createdAt(),
  },
  (table) => [index('webhook_deliveries_checkout_key_idx').on(table.checkoutKey)],
);
