import { type Clock, ConfigurationError, systemClock, type TimerHandle } from '@idem/core';
import { type IdempotencyStore, requirePositive } from '@idem/core/store';
import { drizzleStore } from './drizzleStore.js';
import { missingTablesError } from './missingTablesError.js';
import type { PgDatabaseLike } from './PgDatabaseLike.js';

/** Where the expired keys are: a Drizzle database (its `idem_keys` table) or any store. */
export type SweepTarget =
  | { db: PgDatabaseLike; store?: never }
  | { store: IdempotencyStore; db?: never };

export type SweepExpiredOptions = SweepTarget & {
  /**
   * Rows deleted per statement. Small batches keep each statement's locks and writes
   * short, so the claims running beside a sweep barely slow down; larger ones sweep
   * faster and slow them more (the bench's growth scenario measures both).
   * @default 100
   */
  batchSize?: number;
  /**
   * The most batches in one call; the rest waits for the next call.
   * @default Infinity
   */
  maxBatches?: number;
};

/** @default of the key sweeper's `batchSize`. */
const DEFAULT_SWEEP_BATCH_SIZE = 100;

const storeOf = (target: SweepTarget): IdempotencyStore => {
  if (target.store) return target.store;
  if (target.db) return drizzleStore(target.db);
  throw new ConfigurationError('The sweeper needs `db` (a Drizzle Postgres database) or `store`.');
};

const positiveInteger = (name: string, value: number) =>
  requirePositive(name, value, { integer: true });

/**
 * Deletes expired idempotency records in batches of `batchSize` until none is left (or
 * `maxBatches` ran); returns how many it deleted. Completed records expire `ttlMs` after
 * completion; an in-progress one only once its lease has run out too.
 */
export async function sweepExpired(options: SweepExpiredOptions): Promise<number> {
  const store = storeOf(options);
  return deleteInBatches((limit) => store.sweep({ limit }), {
    ...options,
    batchSize: options.batchSize ?? DEFAULT_SWEEP_BATCH_SIZE,
  });
}

/**
 * Calls `deleteBatch(batchSize)` until a batch comes back short of `batchSize` or
 * `maxBatches` ran; returns the rows deleted. The batching of every sweep (keys, inbox).
 * On a database without idem's tables it fails with a `ConfigurationError` naming
 * `migrate(db)`.
 */
export async function deleteInBatches(
  deleteBatch: (limit: number) => Promise<number>,
  options: { batchSize?: number; maxBatches?: number },
): Promise<number> {
  const batchSize = positiveInteger('batchSize', options.batchSize ?? 1_000);
  const maxBatches = options.maxBatches ?? Number.POSITIVE_INFINITY;
  let total = 0;
  for (let batch = 0; batch < maxBatches; batch++) {
    let deleted: number;
    try {
      deleted = await deleteBatch(batchSize);
    } catch (error) {
      throw missingTablesError(error, 'The sweep deleted nothing', true) ?? error;
    }
    total += deleted;
    if (deleted < batchSize) break;
  }
  return total;
}

/** When and how a sweeper runs, whatever it sweeps. */
export interface SweepScheduleOptions {
  /**
   * Time between the end of one sweep and the start of the next.
   * @default 60_000
   */
  intervalMs?: number;
  /** Called after every sweep with the number of rows it deleted. */
  onSweep?: (deleted: number) => void;
  /**
   * Called when a sweep fails (the database is unreachable, say); the sweeper carries on
   * at the next interval.
   * @default console.error
   */
  onError?: (error: unknown) => void;
  /** @default systemClock */
  clock?: Clock;
}

export type SweeperOptions = SweepExpiredOptions & SweepScheduleOptions;

export interface Sweeper {
  /** Sweeps now, then every `intervalMs`. Calling it twice changes nothing. */
  start(): void;
  /** Stops the schedule and waits for a sweep that is running to finish. */
  stop(): Promise<void>;
  /** One sweep right away (also while stopped); resolves with the rows deleted. */
  sweepNow(): Promise<number>;
}

/**
 * A background sweeper for one app server (several may run: batches skip the rows another
 * sweeper has locked). It never overlaps itself, and `stop()` waits for the sweep in hand.
 */
export function createSweeper(options: SweeperOptions): Sweeper {
  storeOf(options);
  return scheduleSweeps('idem sweeper', () => sweepExpired(options), options);
}

/**
 * Runs `sweep` now and then `intervalMs` after each one ended, never two at once; `stop()`
 * waits for the sweep in hand. The schedule of every sweeper (keys, inbox).
 */
export function scheduleSweeps(
  name: string,
  sweep: () => Promise<number>,
  options: SweepScheduleOptions,
): Sweeper {
  const intervalMs = positiveInteger('intervalMs', options.intervalMs ?? 60_000);
  const clock = options.clock ?? systemClock;
  const onError = options.onError ?? ((error: unknown) => console.error(`${name}:`, error));
  let running = false;
  let timer: TimerHandle | undefined;
  let inFlight: Promise<number> | undefined;

  const sweepNow = (): Promise<number> => {
    inFlight ??= sweep()
      .then((deleted) => {
        options.onSweep?.(deleted);
        return deleted;
      })
      .finally(() => {
        inFlight = undefined;
      });
    return inFlight;
  };

  const tick = () => {
    timer = undefined;
    sweepNow()
      .catch(onError)
      .finally(() => {
        if (running) timer = clock.setTimeout(tick, intervalMs);
      });
  };

  return {
    start() {
      if (running) return;
      running = true;
      tick();
    },
    async stop() {
      running = false;
      if (timer !== undefined) clock.clearTimeout(timer);
      timer = undefined;
      await inFlight?.catch(() => undefined);
    },
    sweepNow,
  };
}
