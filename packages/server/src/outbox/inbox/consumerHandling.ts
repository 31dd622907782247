import type { Clock } from '@idem/core';
import { transactionOnItsConnection } from '../../postgres/driverEnd.js';
import type { PgDatabaseLike, TransactionOf } from '../../postgres/PgDatabaseLike.js';
import { sqlNow } from '../../postgres/sqlTime.js';
import { inboxEvents as inbox } from '../schema.js';
import type { ConsumerEvent, HandleResult } from './ConsumerEvent.js';
import { type BatchHandler, type BatchItemResult, handleInboxBatch } from './handleBatch.js';

/** What a consumer's `handle` and `handleBatch` work with. */
export interface ConsumerContext<TDb extends PgDatabaseLike> {
  db: TDb;
  name: string;
  clock: Clock | undefined;
  emit: (event: ConsumerEvent) => void;
}

/** A delivery as `handle` takes it: an id, and what the report may say about it. */
type Delivery = { id: string; topic?: string; createdAt?: Date };

/** `handle`: the handler once per event id, with the inbox row in its transaction. */
export async function handleOnce<TDb extends PgDatabaseLike, T>(
  context: ConsumerContext<TDb>,
  event: Delivery,
  handler: (tx: TransactionOf<TDb>) => Promise<T>,
): Promise<HandleResult<T>> {
  const { db, name, clock, emit } = context;
  const eventId = event?.id;
  if (typeof eventId !== 'string' || eventId.length === 0) {
    throw new TypeError(
      `idempotentConsumer "${name}": handle(event) needs the event's id (a non-empty string).`,
    );
  }
  const startedAt = tick(clock);
  const report = (type: ConsumerEvent['type']) => ({
    type,
    consumer: name,
    eventId,
    durationMs: tick(clock) - startedAt,
  });
  try {
    // A connection lost under the handler leaves the transaction to the driver (see
    // transactionOnItsConnection): the inbox row goes with it, and a redelivery runs again.
    const result = await transactionOnItsConnection(db, async (tx) => {
      // A concurrent copy of the same event waits here on the first one's uncommitted
      // row, then finds it (duplicate) or, if the first rolled back, takes its place.
      const inserted = await tx
        .insert(inbox)
        .values({ consumer: name, eventId, processedAt: sqlNow(clock) })
        .onConflictDoNothing()
        .returning({ eventId: inbox.eventId });
      if (inserted.length === 0) return { status: 'duplicate' } as const;
      const value = await handler(tx);
      return { status: 'processed', value } as const;
    });
    emit({ ...report(result.status), ...reportOf(event, result.status, clock) });
    return result;
  } catch (error) {
    emit({ ...report('failed'), error, ...reportOf(event, 'failed', clock) });
    throw error;
  }
}

/** `handleBatch`: the new events of a batch in one transaction, split on failure. */
export async function handleEach<TDb extends PgDatabaseLike, TEvent extends { id: string }>(
  context: ConsumerContext<TDb>,
  events: readonly TEvent[],
  handler: BatchHandler<TDb, TEvent>,
): Promise<BatchItemResult[]> {
  const { db, name, clock, emit } = context;
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
  const startedAt = tick(clock);
  const results = await handleInboxBatch({ db, name, clock, handler }, events);
  const durationMs = tick(clock) - startedAt;
  results.forEach((result, index) => {
    const event: { topic?: unknown; createdAt?: unknown } = events[index] ?? {};
    emit({
      type: result.status,
      consumer: name,
      eventId: result.id,
      durationMs,
      batchSize: events.length,
      ...reportOf(event, result.status, clock),
      ...(result.status === 'failed' ? { error: result.error } : {}),
    });
  });
  return results;
}

/** Durations: the clock's time, or the process's monotonic clock. */
const tick = (clock: Clock | undefined) => clock?.now() ?? performance.now();

/** What the delivery itself tells the report: its topic and, once committed, its lag. */
function reportOf(
  event: { topic?: unknown; createdAt?: unknown },
  status: ConsumerEvent['type'],
  clock: Clock | undefined,
) {
  return {
    ...(typeof event.topic === 'string' && { topic: event.topic }),
    ...(status === 'processed' &&
      event.createdAt instanceof Date && {
        lagMs: Math.max(0, (clock?.now() ?? Date.now()) - event.createdAt.getTime()),
      }),
  };
}
