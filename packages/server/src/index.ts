// `@idem/server`: the tRPC middleware. The Postgres base it runs on (migrate, drizzleStore,
// the sweeper) is `@idem/server/postgres`, the outbox `@idem/server/outbox`, the Fetch
// handler `@idem/server/fetch`.
export * from './trpc/index.js';
