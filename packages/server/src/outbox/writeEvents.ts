import { sql } from 'drizzle-orm';
import type { PgDatabaseLike } from '../postgres/PgDatabaseLike.js';
import { AGGREGATE_LOCK_NAMESPACE, OUTBOX_CHANNEL } from './internal/constants.js';
import { outboxEvents } from './schema.js';
import type { ValidEvent } from './validateEvent.js';

export interface WriteEventsOptions {
  lockAggregates: boolean;
  notify: boolean;
}

/**
 * Writes validated events in the caller's transaction and returns their ids, in order.
 * Nothing here commits: the events become visible to relays with the caller's commit, and
 * vanish with its rollback.
 */
export async function writeEvents(
  tx: PgDatabaseLike,
  events: readonly ValidEvent[],
  options: WriteEventsOptions,
): Promise<string[]> {
  if (events.length === 0) return [];
  const keys = [
    ...new Set(
      events.flatMap((event) => (event.aggregateKey === null ? [] : [event.aggregateKey])),
    ),
  ];
  if (options.lockAggregates && keys.length > 0) {
    // Held to the end of the caller's transaction: a second producer of the same aggregate
    // waits here, so it takes its `seq` only after this transaction committed. That makes
    // `seq` order the commit order within an aggregate, which is what lets an `ordered`
    // relay never publish an event while an earlier one of its aggregate is still unseen.
    // Locks are taken in one sorted pass, so two producers cannot deadlock on them.
    await tx.execute(sql`
      select pg_advisory_xact_lock(${AGGREGATE_LOCK_NAMESPACE}::int4, locks.hash)
      from (
        select distinct hashtext(key) as hash
        from unnest(array[${sql.join(
          keys.map((key) => sql`${key}`),
          sql`, `,
        )}]::text[]) as key
        order by hash
      ) as locks`);
  }
  const ids = events.map(() => globalThis.crypto.randomUUID());
  const rows = JSON.stringify(
    events.map((event, index) => ({
      id: ids[index],
      topic: event.topic,
      aggregateKey: event.aggregateKey,
      payload: event.payload,
      headers: event.headers,
    })),
  );
  // Prepared: on postgres-js an unprepared statement with parameters costs two round trips
  // (describe, then execute) and a parse and plan each time; a prepared one is parsed once
  // per connection. At 50 events per statement that was a third of the database's work.
  await prepareInsert(tx, options.notify).execute({ rows });
  return ids;
}

// The whole batch travels as ONE JSON parameter and the statement's text never changes:
// nothing to build per event, one value to send, one plan. `with ordinality … order by`
// hands out `seq` in the caller's order. A JSON `null` payload stays a jsonb null.
const insertRows = sql`insert into ${outboxEvents} (id, topic, aggregate_key, payload, headers)
  select (e.value->>'id')::uuid, e.value->>'topic', e.value->>'aggregateKey',
    e.value->'payload', coalesce(e.value->'headers', '{}'::jsonb)
  from jsonb_array_elements(${sql.placeholder('rows')}::jsonb) with ordinality as e(value, position)
  order by e.position
  returning 1 as one`;

/**
 * The insert in a CTE (which runs to completion whatever reads it) and, for `notify`,
 * NOTIFY in the same statement: it costs no round trip, and Postgres delivers it only at
 * commit, once per transaction (it folds identical notifications of one transaction).
 */
function prepareInsert(tx: PgDatabaseLike, notify: boolean) {
  const inserted = tx.$with('inserted', { one: sql<number>`one` }).as(sql`${insertRows}`);
  return tx
    .with(inserted)
    .select({ notified: notify ? sql`pg_notify(${OUTBOX_CHANNEL}, '')` : sql`1` })
    .from(inserted)
    .limit(1)
    .prepare(notify ? 'idem_outbox_enqueue_notify' : 'idem_outbox_enqueue');
}
