import type { Clock } from '@idem/core';
import { sql } from 'drizzle-orm';
import { isConnectionError } from '../../postgres/connectionError.js';
import { transactionOnItsConnection } from '../../postgres/driverEnd.js';
import type { PgDatabaseLike, TransactionOf } from '../../postgres/PgDatabaseLike.js';
import { nowStatementName, sqlNow } from '../../postgres/sqlTime.js';
import { inboxEvents as inbox } from '../schema.js';

/** What became of one event of a batch. */
export type BatchItemResult =
  /** The handler ran for it and its writes committed with its inbox row. */
  | { id: string; status: 'processed' }
  /** This consumer handled it before (or earlier in the same batch): skipped. */
  | { id: string; status: 'duplicate' }
  /** The handler failed with it, alone in its transaction: rolled back, to be redelivered. */
  | { id: string; status: 'failed'; error: unknown };

export type BatchHandler<TDb extends PgDatabaseLike, TEvent> = (
  events: TEvent[],
  tx: TransactionOf<TDb>,
) => Promise<unknown>;

interface BatchContext<TDb extends PgDatabaseLike, TEvent extends { id: string }> {
  db: TDb;
  name: string;
  clock: Clock | undefined;
  handler: BatchHandler<TDb, TEvent>;
}

/**
 * Handles a batch in one transaction: one statement inserts the inbox rows of every event
 * and returns the new ones, and the handler gets only those. When the handler (or the
 * commit) fails, the batch is split in halves and each half tried again in its own
 * transaction, down to single events: a poison event ends up failing alone, and its
 * neighbours commit without it. A failure before the handler ran (the database is
 * unreachable) is nobody's fault in particular: every event of the group fails with it.
 */
export async function handleInboxBatch<TDb extends PgDatabaseLike, TEvent extends { id: string }>(
  context: BatchContext<TDb, TEvent>,
  events: readonly TEvent[],
): Promise<BatchItemResult[]> {
  // A second copy of an id within the batch is a duplicate of the first: only the first
  // goes to the database, and the copy shares its fate.
  const firstOf = new Map<string, number>();
  const unique: TEvent[] = [];
  events.forEach((event, index) => {
    if (!firstOf.has(event.id)) {
      firstOf.set(event.id, index);
      unique.push(event);
    }
  });
  const outcome = new Map<string, BatchItemResult>();
  await attempt(context, unique, outcome);
  return events.map((event, index) => {
    const result = outcome.get(event.id) as BatchItemResult;
    if (firstOf.get(event.id) === index || result.status === 'failed') return result;
    return { id: event.id, status: 'duplicate' };
  });
}

async function attempt<TDb extends PgDatabaseLike, TEvent extends { id: string }>(
  context: BatchContext<TDb, TEvent>,
  group: TEvent[],
  outcome: Map<string, BatchItemResult>,
): Promise<void> {
  let handlerRan = false;
  try {
    const inserted = await transactionOnItsConnection(context.db, async (tx) => {
      const fresh = await insertInboxRows(
        tx,
        context.name,
        group.map((event) => event.id),
        context.clock,
      );
      const handled = group.filter((event) => fresh.has(event.id));
      if (handled.length > 0) {
        handlerRan = true;
        await context.handler(handled, tx);
      }
      return fresh;
    });
    for (const { id } of group) {
      outcome.set(id, { id, status: inserted.has(id) ? 'processed' : 'duplicate' });
    }
  } catch (error) {
    // A lost connection is no event's fault either: splitting would only send the halves to
    // a database that is not there.
    if (!handlerRan || group.length === 1 || isConnectionError(error)) {
      for (const { id } of group) outcome.set(id, { id, status: 'failed', error });
      return;
    }
    const middle = Math.ceil(group.length / 2);
    await attempt(context, group.slice(0, middle), outcome);
    await attempt(context, group.slice(middle), outcome);
  }
}

/**
 * Inserts the inbox rows of `ids` in one statement and returns the ids that were new. Rows
 * go in sorted by id, so two batches sharing events lock them in the same order and wait
 * for each other instead of deadlocking; a copy in flight in another transaction is waited
 * for, then counted as a duplicate (or taken over if that transaction rolled back).
 */
export async function insertInboxRows(
  tx: PgDatabaseLike,
  name: string,
  ids: readonly string[],
  clock: Clock | undefined,
): Promise<Set<string>> {
  // Prepared (the same text for every batch): no describe round trip, no parse or plan
  // after the first on a connection. The select yields the table's columns in order.
  const rows = await tx
    .insert(inbox)
    .select(
      sql`select ${name}, e.id, ${sqlNow(clock)}
        from jsonb_array_elements_text(${JSON.stringify(ids)}::jsonb) as e(id)
        order by e.id`,
    )
    .onConflictDoNothing()
    .returning({ eventId: inbox.eventId })
    .prepare(nowStatementName('idem_inbox_insert', clock))
    .execute();
  return new Set(rows.map((row) => row.eventId));
}
