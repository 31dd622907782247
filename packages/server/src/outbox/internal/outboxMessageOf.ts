import type { OutboxMessage } from '../OutboxMessage.js';
import { type OutboxEventRow, outboxEvents as outbox } from '../schema.js';

/** The columns of an outbox row that make its message, to select or return. */
export const messageColumns = {
  id: outbox.id,
  topic: outbox.topic,
  aggregateKey: outbox.aggregateKey,
  payload: outbox.payload,
  headers: outbox.headers,
  createdAt: outbox.createdAt,
};

/** An outbox row read with (at least) `messageColumns`. */
export type MessageRow = Pick<OutboxEventRow, keyof typeof messageColumns>;

/**
 * An outbox row as the message a relay publishes and a dead letter shows: the event's
 * content, without the relay's bookkeeping (seq, attempts, lease, schedule).
 */
export function outboxMessageOf(row: MessageRow): OutboxMessage {
  return {
    id: row.id,
    topic: row.topic,
    aggregateKey: row.aggregateKey,
    payload: row.payload,
    headers: row.headers,
    createdAt: row.createdAt,
  };
}
