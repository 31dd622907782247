import { sql } from 'drizzle-orm';
import type { AppDatabase } from './openDatabase';

/** Serialises app servers that start together against one Postgres ("shop" in ASCII). */
const MIGRATION_LOCK_ID = 0x73686f70;

const STATEMENTS = [
  `create table if not exists products (
    id text primary key,
    name text not null,
    description text not null,
    price_cents integer not null,
    color text not null)`,
  `create table if not exists orders (
    id text primary key,
    idempotency_key text not null unique,
    checkout_key text not null,
    session_id text not null,
    charge_id text not null,
    email text not null,
    total_cents integer not null,
    lines jsonb not null,
    created_at timestamptz not null default now())`,
  'create index if not exists orders_checkout_key_idx on orders (checkout_key)',
  `create table if not exists provider_payments (
    id text primary key,
    idempotency_key text not null unique,
    checkout_key text not null,
    amount_cents integer not null,
    card_last4 text not null,
    outcome text not null check (outcome in ('charged', 'declined')),
    decline_code text,
    requests integer not null default 1,
    created_at timestamptz not null default now())`,
  'create index if not exists provider_payments_checkout_key_idx on provider_payments (checkout_key)',
  `create table if not exists emails (
    id serial primary key,
    order_id text not null,
    event_id text not null,
    recipient text not null,
    subject text not null,
    created_at timestamptz not null default now())`,
  'create index if not exists emails_order_id_idx on emails (order_id)',
  `create table if not exists event_deliveries (
    id serial primary key,
    event_id text not null,
    order_id text not null,
    outcome text not null,
    created_at timestamptz not null default now())`,
  'create index if not exists event_deliveries_order_id_idx on event_deliveries (order_id)',
  `create table if not exists checkouts (
    id text primary key,
    session_id text not null,
    cart_id text not null,
    cart_hash text not null,
    lines jsonb not null,
    total_cents integer not null,
    email text,
    card_number text,
    crash_after_charge boolean not null default false,
    redeliver_event boolean not null default false,
    status text not null default 'open' check (status in ('open', 'paying', 'paid', 'declined')),
    order_id text,
    pay_key_scope text,
    created_at timestamptz not null default now())`,
  // Data folders made before Pay noted its key's scope.
  'alter table checkouts add column if not exists pay_key_scope text',
  // One live checkout per cart version: two tabs opening the same cart meet on one row.
  `create unique index if not exists checkouts_live_cart_idx
    on checkouts (session_id, cart_id, cart_hash) where status <> 'declined'`,
  `create table if not exists payment_confirmations (
    id serial primary key,
    event_id text not null,
    checkout_key text not null,
    charge_id text not null,
    amount_cents integer not null,
    created_at timestamptz not null default now())`,
  'create index if not exists payment_confirmations_checkout_key_idx on payment_confirmations (checkout_key)',
  `create table if not exists webhook_deliveries (
    id serial primary key,
    event_id text not null,
    checkout_key text not null,
    status integer not null,
    replayed boolean not null,
    created_at timestamptz not null default now())`,
  'create index if not exists webhook_deliveries_checkout_key_idx on webhook_deliveries (checkout_key)',
  `insert into products (id, name, description, price_cents, color) values
    ('sencha', 'Sencha, 100 g', 'Green tea from Shizuoka, steamed and rolled.', 1250, '#6b8f3a'),
    ('mug', 'Stoneware mug', 'Hand-glazed, 350 ml, dishwasher safe.', 1800, '#3e6d8e'),
    ('honey', 'Heather honey', 'Raw, from the moors, 250 g jar.', 950, '#d49a2a'),
    ('infuser', 'Tea infuser', 'Fine stainless mesh with a drip tray.', 700, '#8a8f98')
  on conflict (id) do nothing`,
];

/**
 * Creates the shop's own tables (idem's come from `migrate()` of `@idem/server/postgres`).
 * Safe at every start and from several servers at once: one transaction behind an advisory
 * lock.
 */
export async function migrateApp(db: AppDatabase): Promise<void> {
  await db.transaction(async (tx) => {
    await tx.execute(sql.raw(`select pg_advisory_xact_lock(${MIGRATION_LOCK_ID})`));
    for (const statement of STATEMENTS) await tx.execute(sql.raw(statement));
  });
}
