import type { Clock } from '@idem/core';
import { sql } from 'drizzle-orm';
import type { PgDatabaseLike } from '../../postgres/PgDatabaseLike.js';
import { executeRows } from '../../postgres/rows.js';
import { nowStatementName, sqlNow } from '../../postgres/sqlTime.js';
import { outboxEvents as outbox } from '../schema.js';

/** What became of one claimed event. */
export type Settlement =
  /** Published: delete its row, or mark it sent. */
  | { id: string; seq: number; outcome: 'sent' }
  /** Failed: count the attempt and try again after `delayMs`. */
  | { id: string; outcome: 'retry'; error: string; delayMs: number }
  /** Failed for the last time: count the attempt and dead-letter it. */
  | { id: string; outcome: 'dead'; error: string }
  /** The publisher was unreachable: give it back as it was, noting the error. */
  | { id: string; outcome: 'release'; error: string };

/**
 * Settles a claimed batch in one statement and returns the ids it settled. An id missing
 * from the result was no longer leased under `token`: the lease ran out and another
 * relay took the event over, so this relay's outcome is not written (fencing).
 *
 * A published event's row is deleted (`keepSent: false`) or marked sent to be kept as
 * history until `cleanupSent` deletes it.
 */
export async function settleBatch(
  db: PgDatabaseLike,
  token: string,
  settlements: readonly Settlement[],
  options: { keepSent: boolean; clock: Clock | undefined },
): Promise<Set<string>> {
  if (settlements.length === 0) return new Set();
  const now = sqlNow(options.clock);
  const sentSeqs = settlements.flatMap((settlement) =>
    settlement.outcome === 'sent' ? [settlement.seq] : [],
  );
  // Published rows are found by primary key from one array: in the bench's rounds of
  // 1,000 this costs less Postgres time than joining a record set on the event id.
  const published = sql`${outbox.seq} = any(${`{${sentSeqs.join(',')}}`}::bigint[])
    and ${outbox.lockedBy} = ${token}`;
  if (sentSeqs.length === settlements.length) {
    // The usual round: everything was published. Deleting writes the row once more where
    // marking it sent would write a new version, index entries for it, and later the
    // cleanup's delete as well. Prepared, like the claim: the same text every round, so no
    // describe round trip and no parse or plan after the first.
    const rows = options.keepSent
      ? await db
          .update(outbox)
          .set({ sentAt: now, lockedUntil: null, lockedBy: null })
          .where(published)
          .returning({ id: outbox.id })
          .prepare(nowStatementName('idem_outbox_mark_sent', options.clock))
          .execute()
      : await db
          .delete(outbox)
          .where(published)
          .returning({ id: outbox.id })
          .prepare('idem_outbox_delete_sent')
          .execute();
    return idsOf(rows);
  }
  const settleSent = options.keepSent
    ? sql`update ${outbox} set sent_at = ${now}, locked_until = null, locked_by = null
        where ${published} returning ${outbox.id}`
    : sql`delete from ${outbox} where ${published} returning ${outbox.id}`;
  // The failures travel as one JSON parameter: the statement's text is the same for every
  // batch size, so there is nothing to build per event and one value to send.
  const failures = JSON.stringify(
    settlements.flatMap((settlement) =>
      settlement.outcome === 'sent'
        ? []
        : [
            {
              id: settlement.id,
              outcome: settlement.outcome,
              error: settlement.error,
              delay_ms: settlement.outcome === 'retry' ? settlement.delayMs : 0,
            },
          ],
    ),
  );
  const settleFailed = sql`update ${outbox} set
      dead_at = case when v.outcome = 'dead' then ${now} end,
      attempts = ${outbox.attempts} + case when v.outcome in ('retry', 'dead') then 1 else 0 end,
      last_error = v.error,
      available_at = case
        when v.outcome = 'retry' then ${now} + v.delay_ms * interval '1 millisecond'
        else ${outbox.availableAt} end,
      locked_until = null,
      locked_by = null
    from jsonb_to_recordset(${failures}::jsonb) as v(id uuid, outcome text, error text, delay_ms float8)
    where ${outbox.id} = v.id and ${outbox.lockedBy} = ${token}
    returning ${outbox.id}`;
  // Both halves in one statement (they touch different rows): one round trip, one commit.
  return idsOf(
    await executeRows<{ id: string }>(
      db,
      sql`with sent as (${settleSent}), failed as (${settleFailed})
        select id from sent union all select id from failed`,
    ),
  );
}

const idsOf = (rows: { id: string }[]) => new Set(rows.map((row) => row.id));
