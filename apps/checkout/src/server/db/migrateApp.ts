import { is, SQL, sql } from 'drizzle-orm';
import { getTableConfig, IndexedColumn, PgDialect, type PgTable } from 'drizzle-orm/pg-core';
import type { AppDatabase } from './openDatabase';
import {
  checkouts,
  emails,
  eventDeliveries,
  orders,
  paymentConfirmations,
  products,
  providerPayments,
  webhookDeliveries,
} from './schema';

/** Serialises app servers that start together against one Postgres ("shop" in ASCII). */
const MIGRATION_LOCK_ID = 0x73686f70;

const dialect = new PgDialect();

/** A piece of SQL from the schema (a default, a check, an index's predicate) as DDL text. */
function ddl(fragment: SQL): string {
  return dialect.sqlToQuery(fragment.inlineParams(), 'indexes').sql;
}

/** A column's default as DDL: SQL as written, a string quoted, a number or boolean as is. */
function defaultValue(value: unknown): string {
  if (is(value, SQL)) return ddl(value);
  return typeof value === 'string' ? `'${value.replaceAll("'", "''")}'` : String(value);
}

/** `create table if not exists` for a table of schema.ts, then `create index if not exists` for its indexes. */
function createTable(table: PgTable): string[] {
  const { name, columns, checks, indexes } = getTableConfig(table);
  const definitions = [
    ...columns.map((column) =>
      [
        column.name,
        column.getSQLType(),
        column.primary ? 'primary key' : column.notNull ? 'not null' : '',
        column.isUnique ? 'unique' : '',
        column.default === undefined ? '' : `default ${defaultValue(column.default)}`,
      ]
        .filter(Boolean)
        .join(' '),
    ),
    ...checks.map((constraint) => `constraint ${constraint.name} check (${ddl(constraint.value)})`),
  ];
  return [
    `create table if not exists ${name} (${definitions.join(', ')})`,
    ...indexes.map(({ config }) => {
      const indexed = config.columns.map((column) =>
        is(column, IndexedColumn) ? column.name : ddl(column as SQL),
      );
      return [
        `create ${config.unique ? 'unique ' : ''}index if not exists ${config.name}`,
        `on ${name} (${indexed.join(', ')})`,
        config.where ? `where ${ddl(config.where)}` : '',
      ]
        .filter(Boolean)
        .join(' ');
    }),
  ];
}

const STATEMENTS = [
  ...[
    products,
    orders,
    providerPayments,
    emails,
    eventDeliveries,
    checkouts,
    paymentConfirmations,
    webhookDeliveries,
  ].flatMap(createTable),
  // Data folders made before Pay noted its key's scope.
  'alter table checkouts add column if not exists pay_key_scope text',
  `insert into products (id, name, description, price_cents, color) values
    ('sencha', 'Sencha, 100 g', 'Green tea from Shizuoka, steamed and rolled.', 1250, '#6b8f3a'),
    ('mug', 'Stoneware mug', 'Hand-glazed, 350 ml, dishwasher safe.', 1800, '#3e6d8e'),
    ('honey', 'Heather honey', 'Raw, from the moors, 250 g jar.', 950, '#d49a2a'),
    ('infuser', 'Tea infuser', 'Fine stainless mesh with a drip tray.', 700, '#8a8f98')
  on conflict (id) do nothing`,
];

/**
 * Creates the shop's own tables as schema.ts declares them (idem's come from `migrate()` of
 * `@idem/server/postgres`). Safe at every start and from several servers at once: one
 * transaction behind an advisory lock.
 */
export async function migrateApp(db: AppDatabase): Promise<void> {
  await db.transaction(async (tx) => {
    await tx.execute(sql.raw(`select pg_advisory_xact_lock(${MIGRATION_LOCK_ID})`));
    for (const statement of STATEMENTS) await tx.execute(sql.raw(statement));
  });
}
