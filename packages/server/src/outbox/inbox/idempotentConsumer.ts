import { type Clock, ConfigurationError } from '@idem/core';
import { notifyObserver } from '@idem/core/store';
import { and, eq, lt } from 'drizzle-orm';
import type { PgDatabaseLike, TransactionOf } from '../../postgres/PgDatabaseLike.js';

export type { TransactionOf };

import { deleteSkipLocked } from '../../postgres/deleteSkipLocked.js';
import { missingTablesError } from '../../postgres/missingTablesError.js';
import { checkTransactionsOn } from '../../postgres/nodePostgresClient.js';
import { sqlLater, sqlNow } from '../../postgres/sqlTime.js';
import { inboxEvents as inbox } from '../schema.js';
import type { ConsumerEvent, HandleResult } from './ConsumerEvent.js';
import { type ConsumerContext, handleEach, handleOnce } from './consumerHandling.js';
import type { BatchHandler, BatchItemResult } from './handleBatch.js';

export type { BatchHandler, BatchItemResult, ConsumerEvent, HandleResult };

export interface IdempotentConsumerOptions<TDb extends PgDatabaseLike> {
  /** The consumer's database, holding `idem_inbox` (run `migrate(db)` first). */
  db: TDb;
  /** Names this consumer in the inbox: each consumer of an event handles it once. */
  name: string;
  /**
   * How long an inbox row is kept after its event was handled. A copy of the event that
   * arrives later runs the handler again, so this must be longer than
   * `maxRedeliveryDelayMs`; `idempotentConsumer` refuses a shorter one.
   * @default 604_800_000 (7 days)
   */
  retentionMs?: number;
  /**
   * The longest time after a first delivery at which the same event can arrive again: the
   * broker's redelivery (ack wait, nak delays) and the relay's republishing (lease, retry
   * backoff). `consumeJetStream` checks its own delays against it.
   * @default 3_600_000 (1 h)
   */
  maxRedeliveryDelayMs?: number;
  /**
   * Stamps `processed_at` and dates cleanup.
   * @default the database clock
   */
  clock?: Clock;
  /**
   * Called after every `handle`, and per event after every `handleBatch` (processed,
   * duplicate or failed); exceptions are swallowed.
   * @default no reporting
   */
  onEvent?: (event: ConsumerEvent) => void;
}

export interface IdempotentConsumer<TDb extends PgDatabaseLike = PgDatabaseLike> {
  readonly name: string;
  readonly retentionMs: number;
  readonly maxRedeliveryDelayMs: number;
  /**
   * Runs `handler` once per event id: the inbox row and the handler's writes (made through
   * `tx`) commit together or not at all. A copy of an event already handled is skipped and
   * reported as `duplicate`; a handler that throws rolls back, so a redelivery runs it again.
   * Use `tx`, never the outer `db`, inside the handler (PGlite has one connection).
   */
  handle<T>(
    event: { id: string; topic?: string; createdAt?: Date },
    handler: (tx: TransactionOf<TDb>) => Promise<T>,
  ): Promise<HandleResult<T>>;
  /**
   * Runs `handler` once for the events of `events` not handled before, in ONE transaction
   * with their inbox rows (inserted by one statement; copies already handled are filtered
   * out before the handler sees them). If the handler fails, the batch is split and retried
   * in smaller transactions down to single events, so a poison event fails alone and its
   * neighbours commit. Never rejects for a handler's error: it resolves with one result
   * per event, in order, and each failed event is for the caller to redeliver.
   */
  handleBatch<TEvent extends { id: string }>(
    events: readonly TEvent[],
    handler: BatchHandler<TDb, TEvent>,
  ): Promise<BatchItemResult[]>;
  /** Deletes up to `limit` of this consumer's inbox rows older than `retentionMs`. */
  cleanup(options?: { limit?: number }): Promise<number>;
}

/**
 * The consuming half of exactly-once: deduplicates deliveries by event id in an inbox
 * table, in the same transaction as the consumer's own writes.
 *
 * @example
 * const billing = idempotentConsumer({ db, name: 'billing' });
 * const result = await billing.handle(event, async (tx) => {
 *   await tx.insert(invoices).values({ orderId: event.payload.orderId });
 * });
 * if (result.status === 'duplicate') log('already invoiced');
 */
export function idempotentConsumer<TDb extends PgDatabaseLike>(
  options: IdempotentConsumerOptions<TDb>,
): IdempotentConsumer<TDb> {
  const { db, name, clock } = options;
  if (typeof name !== 'string' || name.length === 0) {
    throw new ConfigurationError('idempotentConsumer: name must be a non-empty string.');
  }
  const retentionMs = options.retentionMs ?? 604_800_000;
  const maxRedeliveryDelayMs = options.maxRedeliveryDelayMs ?? 3_600_000;
  for (const [option, value] of [
    ['retentionMs', retentionMs],
    ['maxRedeliveryDelayMs', maxRedeliveryDelayMs],
  ] as const) {
    if (!(Number.isFinite(value) && value >= 0)) {
      throw new ConfigurationError(
        `idempotentConsumer "${name}": ${option} must be a finite number of ms, 0 or more; got ${value}.`,
      );
    }
  }
  if (retentionMs <= maxRedeliveryDelayMs) {
    throw new ConfigurationError(
      `idempotentConsumer "${name}": retentionMs (${retentionMs} ms) must be longer than ` +
        `maxRedeliveryDelayMs (${maxRedeliveryDelayMs} ms). An inbox row deleted before the ` +
        'last redelivery of its event lets that redelivery run the handler a second time. ' +
        'Raise retentionMs or lower the redelivery delays.',
    );
  }
  checkTransactionsOn(db, `idempotentConsumer "${name}"`);
  // A database without idem's tables (migrate(db) not run) is told as such, in what
  // `handle` throws, what `handleBatch` answers and what `onEvent` hears.
  const explain = (error: unknown) =>
    missingTablesError(error, `idempotentConsumer "${name}" handled nothing`) ?? error;
  const context: ConsumerContext<TDb> = {
    db,
    name,
    clock,
    emit: (event) =>
      notifyObserver(
        options.onEvent,
        event.error === undefined ? event : { ...event, error: explain(event.error) },
      ),
  };

  return {
    name,
    retentionMs,
    maxRedeliveryDelayMs,
    async handle(event, handler) {
      try {
        return await handleOnce(context, event, handler);
      } catch (error) {
        throw explain(error);
      }
    },
    handleBatch: async (events, handler) =>
      (await handleEach(context, events, handler)).map((result) =>
        result.status === 'failed' ? { ...result, error: explain(result.error) } : result,
      ),
    async cleanup({ limit = 1_000 } = {}) {
      const cutoff = sqlLater(sqlNow(clock), -retentionMs);
      const deleted = await deleteSkipLocked(db, inbox, {
        key: [inbox.consumer, inbox.eventId],
        doomed: and(eq(inbox.consumer, name), lt(inbox.processedAt, cutoff)),
        limit,
      });
      return deleted.length;
    },
  };
}
