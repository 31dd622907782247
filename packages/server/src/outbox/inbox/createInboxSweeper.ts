import { ConfigurationError } from '@idem/core';
import { requirePositive } from '@idem/core/store';
import type { PgDatabaseLike } from '../../postgres/PgDatabaseLike.js';
import {
  deleteInBatches,
  type Sweeper,
  type SweepScheduleOptions,
  scheduleSweeps,
} from '../../postgres/sweeper.js';
import type { IdempotentConsumer } from './idempotentConsumer.js';

export interface InboxSweeperOptions extends SweepScheduleOptions {
  /**
   * The consumers whose inbox rows are swept, each by its own `retentionMs` (which
   * `idempotentConsumer` already checked against its redelivery delays).
   */
  consumers: readonly IdempotentConsumer<PgDatabaseLike>[];
  /**
   * Rows deleted per statement. Small batches keep each statement's locks short, so a
   * consumer's inbox insert never queues behind a sweep.
   * @default 1_000
   */
  batchSize?: number;
  /**
   * The most batches per consumer in one sweep; the rest waits for the next sweep.
   * @default Infinity
   */
  maxBatches?: number;
}

/**
 * Inbox retention on a schedule: every `intervalMs`, deletes each consumer's inbox rows
 * older than its `retentionMs`, in batches of `batchSize` (`FOR UPDATE SKIP LOCKED`, so
 * several app servers may run one). Same schedule as `createSweeper`: `start()`, `stop()`,
 * `sweepNow()`; `onSweep` gets the rows deleted over all consumers.
 *
 * @example
 * const inboxSweeper = createInboxSweeper({ consumers: [billing, shipping] });
 * inboxSweeper.start();
 * // on shutdown:
 * await inboxSweeper.stop();
 */
export function createInboxSweeper(options: InboxSweeperOptions): Sweeper {
  const { consumers } = options;
  if (!Array.isArray(consumers) || consumers.length === 0) {
    throw new ConfigurationError(
      'createInboxSweeper: consumers must list at least one idempotentConsumer(…) to sweep.',
    );
  }
  const batchSize = requirePositive('createInboxSweeper: batchSize', options.batchSize ?? 1_000, {
    integer: true,
  });
  const sweep = async () => {
    let total = 0;
    for (const consumer of consumers) {
      total += await deleteInBatches((limit) => consumer.cleanup({ limit }), {
        batchSize,
        ...(options.maxBatches === undefined ? {} : { maxBatches: options.maxBatches }),
      });
    }
    return total;
  };
  return scheduleSweeps('idem inbox sweeper', sweep, options);
}
