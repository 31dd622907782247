// `@idem/server`: the tRPC middleware and the Postgres store it runs on (the schema,
// migrations and sweeper). The outbox is `@idem/server/outbox`, the Fetch handler
// `@idem/server/fetch`.
export { type DrizzleStoreOptions, drizzleStore } from './drizzle/drizzleStore.js';
export { type MigrateResult, migrate } from './drizzle/migrate.js';
export type { PgDatabaseLike, TransactionOf } from './drizzle/PgDatabaseLike.js';
export { type IdempotencyKeyRow, idempotencyKeys } from './drizzle/schema.js';
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
