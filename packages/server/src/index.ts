export { type DrizzleStoreOptions, drizzleStore } from './drizzle/drizzleStore.js';
export { type MigrateResult, migrate } from './drizzle/migrate.js';
export type { PgDatabaseLike, TransactionOf } from './drizzle/PgDatabaseLike.js';
export { type IdempotencyKeyRow, idempotencyKeys } from './drizzle/schema.js';
export * from './outbox/index.js';
export {
  createSweeper,
  type SweepExpiredOptions,
  type Sweeper,
  type SweeperOptions,
  type SweepScheduleOptions,
  type SweepTarget,
  sweepExpired,
} from './sweeper.js';
export * from './trpc/index.js';
