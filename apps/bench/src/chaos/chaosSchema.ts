import { bigserial, integer, pgTable, text, timestamp } from 'drizzle-orm/pg-core';

/**
 * The transaction-mode side effect: one row per execution, deliberately WITHOUT a unique
 * constraint on `business_id`, so a second execution of one logical request shows up as
 * a second row instead of an error.
 */
export const chaosOrders = pgTable('chaos_orders', {
  id: bigserial('id', { mode: 'number' }).primaryKey(),
  businessId: text('business_id').notNull(),
  amountCents: integer('amount_cents').notNull(),
  server: text('server').notNull(),
  createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
});

/**
 * A simulated payment provider that, like Stripe, deduplicates by the idempotency key it
 * is given (`provider_key`, from `deriveKey('charge')`); `business_id` is not unique, so a
 * charge made under a second key for the same logical request would show up twice.
 */
export const chaosCharges = pgTable('chaos_charges', {
  id: bigserial('id', { mode: 'number' }).primaryKey(),
  providerKey: text('provider_key').notNull().unique(),
  businessId: text('business_id').notNull(),
  amountCents: integer('amount_cents').notNull(),
});

/** Every call that reached the provider, repeats included (a crash before the step was saved). */
export const chaosProviderCalls = pgTable('chaos_provider_calls', {
  id: bigserial('id', { mode: 'number' }).primaryKey(),
  providerKey: text('provider_key').notNull(),
});

export const CREATE_CHAOS_TABLES = `
  create table chaos_orders (
    id bigserial primary key,
    business_id text not null,
    amount_cents integer not null,
    server text not null,
    created_at timestamptz not null default now()
  );
  create table chaos_charges (
    id bigserial primary key,
    provider_key text not null unique,
    business_id text not null,
    amount_cents integer not null
  );
  create table chaos_provider_calls (
    id bigserial primary key,
    provider_key text not null
  );`;
