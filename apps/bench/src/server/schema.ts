import { bigserial, integer, pgTable, text, timestamp } from 'drizzle-orm/pg-core';

/** The business table of the HTTP benchmarks: every procedure inserts one row. */
export const benchOrders = pgTable('bench_orders', {
  id: bigserial('id', { mode: 'number' }).primaryKey(),
  principal: text('principal').notNull(),
  sku: text('sku').notNull(),
  quantity: integer('quantity').notNull(),
  /** Which run or storm wrote it, so a scenario can count its own executions. */
  ref: text('ref').notNull(),
  createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
});

/** Created by the run (the bench's own table, not idem's: idem's come from `migrate`). */
export const CREATE_BENCH_TABLES = `
  create table if not exists bench_orders (
    id bigserial primary key,
    principal text not null,
    sku text not null,
    quantity integer not null,
    ref text not null,
    created_at timestamptz not null default now()
  )`;
