import { type Clock, ConfigurationError } from '@idem/core';
import { notifyObserver } from '@idem/core/store';
import { and, eq, lt } from 'drizzle-orm';
import type { PgDatabaseLike, TransactionOf } from '../../postgres/PgDatabaseLike.js';

export type { TransactionOf };

import { deleteSkipLocked } from '../../postgres/deleteSkipLocked.js';
import { sqlLater, sqlNow } from '../../postgres/sqlTime.js';
import { inboxEvents as inbox } from '../schema.js';
import { type BatchHandler, type BatchItemResult, handleInboxBatch } from './handleBatch.js';

export type { BatchHandler, BatchItemResult };

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

/** What `handle` did, for logs and metrics. */
export interface ConsumerEvent {
  type: 'processed' | 'duplicate' | 'failed';
  consumer: string;
  eventId: string;
  durationMs: number;
  /** Why the handler failed (its transaction was rolled back). */
  error?: unknown;
  /** The event's topic, when the delivered event carries one (an `OutboxMessage` does). */
  topic?: string;
  /**
   * `processed` only: from the producing transaction (the event's `createdAt`) to this
   * handling's commit, when the delivered event carries `createdAt`.
   */
  lagMs?: number;
  /** From `handleBatch`: how many events the batch had (`durationMs` is the batch's). */
  batchSize?: number;
}

/** `processed`: the handler ran and committed. `duplicate`: it ran before; skipped. */
export type HandleResult<T> = { status: 'processed'; value: T } | { status: 'duplicate' };

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
  const tick = () => clock?.now() ?? performance.now();
  /** What the delivery itself tells the report: its topic and, once committed, its lag. */
  const reportOf = (
    event: { topic?: unknown; createdAt?: unknown },
    status: ConsumerEvent['type'],
  ) => ({
    ...(typeof event.topic === 'string' && { topic: event.topic }),
    ...(status === 'processed' &&
      event.createdAt instanceof Date && {
        lagMs: Math.max(0, (clock?.now() ?? Date.now()) - event.createdAt.getTime()),
      }),
  });
  const emit = (event: ConsumerEvent) => notifyObserver(options.onEvent, event);

  return {
    name,
    retentionMs,
    maxRedeliveryDelayMs,

    async handle(event, handler) {
      const eventId = event?.id;
      if (typeof eventId !== 'string' || eventId.length === 0) {
        throw new TypeError(
          `idempotentConsumer "${name}": handle(event) needs the event's id (a non-empty string).`,
        );
      }
      const startedAt = tick();
      const took = () => tick() - startedAt;
      try {
        const result = await db.transaction(async (tx) => {
          // A concurrent copy of the same event waits here on the first one's uncommitted
          // row, then finds it (duplicate) or, if the first rolled back, takes its place.
          const inserted = await tx
            .insert(inbox)
            .values({ consumer: name, eventId, processedAt: sqlNow(clock) })
            .onConflictDoNothing()
            .returning({ eventId: inbox.eventId });
          if (inserted.length === 0) return { status: 'duplicate' } as const;
          const value = await handler(tx as TransactionOf<TDb>);
          return { status: 'processed', value } as const;
        });
        emit({
          type: result.status,
          consumer: name,
          eventId,
          durationMs: took(),
          ...reportOf(event, result.status),
        });
        return result;
      } catch (error) {
        emit({
          type: 'failed',
          consumer: name,
          eventId,
          durationMs: took(),
          error,
          ...reportOf(event, 'failed'),
        });
        throw error;
      }
    },

    async handleBatch(events, handler) {
      if (!Array.isArray(events)) {
        throw new TypeError(`idempotentConsumer "${name}": handleBatch(events) needs an array.`);
      }
      for (const event of events) {
        if (typeof event?.id !== 'string' || event.id.length === 0) {
          throw new TypeError(
            `idempotentConsumer "${name}": every event of handleBatch(events) needs its id (a non-empty string).`,
          );
        }
      }
      if (events.length === 0) return [];
      const startedAt = tick();
      const results = await handleInboxBatch({ db, name, clock, handler }, events);
      const durationMs = tick() - startedAt;
      for (const [index, result] of results.entries()) {
        emit({
          type: result.status,
          consumer: name,
          eventId: result.id,
          durationMs,
          batchSize: events.length,
          ...reportOf(events[index] as { topic?: unknown; createdAt?: unknown }, result.status),
          ...(result.status === 'failed' ? { error: result.error } : {}),
        });
      }
      return results;
    },

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
