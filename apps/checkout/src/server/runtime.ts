import type { IdempotencyStore } from '@idem/core/store';
import { createSweeper, drizzleStore, migrate } from '@idem/server/postgres';
import { migrateApp } from './db/migrateApp';
import type { AppDatabase } from './db/openDatabase';
import { openDatabase } from './db/openDatabase';
import { type EventPipeline, startEventPipeline } from './events/startEventPipeline';
import { type FakePaymentProvider, fakePaymentProvider } from './payments/fakePaymentProvider';
import { PAYMENT_WEBHOOK_PATH } from './payments/paymentEvents';

/** Everything the server holds for its lifetime: one per process. */
export interface Runtime {
  db: AppDatabase;
  store: IdempotencyStore;
  provider: FakePaymentProvider;
  events: EventPipeline;
  describe(): string;
  /** Stops `service` first when the runtime stops (before the database closes). */
  stopsWith(service: { stop(): void }): void;
  stop(): Promise<void>;
}

// On globalThis: Next.js may load this module once per bundle (instrumentation, route
// handlers), and there must be one database (PGlite: one process, one connection).
const holder = globalThis as { __idemCheckoutRuntime?: Promise<Runtime> };

/** The process's runtime, started on first use: database, migrations, relay. */
export function getRuntime(): Promise<Runtime> {
  holder.__idemCheckoutRuntime ??= start().catch((error: unknown) => {
    delete holder.__idemCheckoutRuntime;
    throw error;
  });
  return holder.__idemCheckoutRuntime;
}

async function start(): Promise<Runtime> {
  const database = await openDatabase();
  const { db } = database;
  try {
    await migrate(db);
    await migrateApp(db);
    const events = await startEventPipeline(db);
    // Completed keys replay for 24 h (the middleware's ttlMs), then the sweeper deletes them.
    const sweeper = createSweeper({ db });
    sweeper.start();
    const declineRate = Number(process.env.DEMO_RANDOM_DECLINE_RATE);
    const randomDeclineRate = declineRate >= 0 && declineRate <= 1 ? declineRate : 0.1;
    let stopping: Promise<void> | undefined;
    const services: { stop(): void }[] = [];
    const runtime: Runtime = {
      db,
      store: drizzleStore(db),
      provider: fakePaymentProvider({
        db,
        randomDeclineRate,
        webhookUrl: `${localUrl()}${PAYMENT_WEBHOOK_PATH}`,
      }),
      events,
      describe: () => `database: ${database.description}\n  events:   ${events.description}`,
      stopsWith: (service) => {
        services.push(service);
      },
      stop() {
        stopping ??= (async () => {
          for (const service of services) service.stop();
          await Promise.all([events.stop(), sweeper.stop()]).catch(() => undefined);
          await database.close();
        })();
        return stopping;
      },
    };
    for (const signal of ['SIGINT', 'SIGTERM'] as const) {
      process.once(signal, () => {
        runtime.stop().finally(() => process.exit(0));
      });
    }
    return runtime;
  } catch (error) {
    await database.close().catch(() => undefined);
    throw error;
  }
}

/**
 * This server as seen from this machine, for the provider's webhooks: the address
 * `next start` binds (HOST, every interface by default) on PORT.
 */
function localUrl(): string {
  const host = !process.env.HOST || process.env.HOST === '0.0.0.0' ? '127.0.0.1' : process.env.HOST;
  return `http://${host.includes(':') ? `[${host}]` : host}:${process.env.PORT ?? '3000'}`;
}
