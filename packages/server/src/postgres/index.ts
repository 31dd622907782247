// `@idem/server/postgres`: the Postgres base every other entry runs on (the migrations, the
// idempotency store, its table and the key sweeper), apart from the main entry so that an app
// with only the outbox or the Fetch handler need not install tRPC (test/entries.test.ts checks
// the import graph).

export { type DrizzleStoreOptions, drizzleStore } from './drizzleStore.js';
export { type MigrateResult, migrate } from './migrate.js';
export type { PgDatabaseLike, TransactionOf } from './PgDatabaseLike.js';
export { type IdempotencyKeyRow, idempotencyKeys } from './schema.js';
export {
  createSweeper,
  type SweepExpiredOptions,
  type Sweeper,
  type SweeperOptions,
  type SweepScheduleOptions,
  type SweepTarget,
  sweepExpired,
} from './sweeper.js';
export { TransactionAbortedError } from './TransactionAbortedError.js';
export type { TransactionIdempotency } from './transactionMode.js';
