import type { Random } from '@idem/core';
import type { Consumer } from '@nats-io/jetstream';
import type { output } from 'zod/v4/core';
import type { EventDefinitions, EventSchemas, TopicOf } from '../outbox/defineEvents.js';
import type { IdempotentConsumer, TransactionOf } from '../outbox/inbox/idempotentConsumer.js';
import type { OutboxMessage } from '../outbox/OutboxMessage.js';
import type { PgDatabaseLike } from '../postgres/PgDatabaseLike.js';

/** An event as the handler gets it: typed by topic when `events` is given. */
export type DeliveredEvent<TSchemas extends EventSchemas> = {
  [TTopic in TopicOf<TSchemas>]: OutboxMessage<output<TSchemas[TTopic]>, TTopic> & {
    /** 1 on the first delivery, then one more per redelivery. */
    deliveryCount: number;
  };
}[TopicOf<TSchemas>];

/** What the helper reports per message, for logs and metrics. */
export interface JetStreamConsumerEvent {
  /**
   * `processed` and `duplicate` are acknowledged; `failed` is nak'ed for redelivery after
   * `retryInMs`; `rejected` (no message id, not JSON, payload failing its schema) is
   * terminated, since no redelivery could fix it; `error`: the subscription itself failed.
   */
  type: 'processed' | 'duplicate' | 'failed' | 'rejected' | 'error';
  subject?: string;
  eventId?: string;
  deliveryCount?: number;
  retryInMs?: number;
  error?: unknown;
  /** With `batchHandler`: how many messages the batch had. */
  batchSize?: number;
}

export interface ConsumeJetStreamOptions<
  TDb extends PgDatabaseLike,
  TSchemas extends EventSchemas,
> {
  /**
   * A durable pull consumer with explicit acks: `await js.consumers.get(stream, name)`.
   * Its `ack_wait` is a redelivery delay, so it must not exceed the inbox's
   * `maxRedeliveryDelayMs`. Its `max_ack_pending` (1,000 unless set) must be at least
   * `maxBatch × concurrency`: JetStream stops delivering at that many unacknowledged
   * messages, so the batches in flight could not fill.
   */
  consumer: Consumer;
  /** Deduplicates by event id; the handler's writes share its transaction. */
  inbox: IdempotentConsumer<TDb>;
  /**
   * Handles one event, in a transaction of its own; write through `tx` only. Throwing naks
   * the message. Give either `handler` or `batchHandler`.
   */
  handler?: (event: DeliveredEvent<TSchemas>, tx: TransactionOf<TDb>) => Promise<unknown>;
  /**
   * Handles up to `maxBatch` events at once, in ONE transaction with their inbox rows
   * (`inbox.handleBatch`: events already handled are left out). If it throws, the batch is
   * split and retried down to single events, so only a poison event is nak'ed; the others
   * are acked. Give either `handler` or `batchHandler`.
   */
  batchHandler?: (events: DeliveredEvent<TSchemas>[], tx: TransactionOf<TDb>) => Promise<unknown>;
  /**
   * The most messages per `batchHandler` call: whatever has arrived, up to this many, is
   * handled together (a lone message is not held back to fill a batch).
   * @default 100 with `batchHandler`, 1 with `handler`
   */
  maxBatch?: number;
  /**
   * Batches (or single messages) handled at the same time, each in its own transaction.
   * At most one of them is smaller than `maxBatch`: messages that arrive while a partial
   * batch is handled wait for it to end (or for a full batch) and go in the next one
   * together, like a database's group commit, instead of an idle worker committing each
   * one or two alone.
   * @default 1
   */
  concurrency?: number;
  /**
   * Parses payloads with their topic's schema (and types the handler by topic).
   * @default payloads are handed over as decoded JSON
   */
  events?: EventDefinitions<TSchemas>;
  /**
   * The redelivery delay after a failed handler, growing with the delivery count.
   * @default { baseDelayMs: 1_000, maxDelayMs: 60_000, random: Math.random }
   */
  nakBackoff?: {
    /**
     * The ceiling of the first delay (full jitter).
     * @default 1_000
     */
    baseDelayMs?: number;
    /**
     * The longest delay; must not exceed the inbox's `maxRedeliveryDelayMs`.
     * @default 60_000
     */
    maxDelayMs?: number;
    /**
     * Jitter's randomness.
     * @default Math.random
     */
    random?: Random;
  };
  /**
   * Messages pulled ahead of the handler.
   * @default the larger of 100 and 2 × maxBatch × concurrency
   */
  maxMessages?: number;
  /**
   * How long each pull request waits on the server (at least 1_000). Missed heartbeats
   * (half of this) make the client pull again, so a shorter one resumes sooner after the
   * node holding the consumer's pull request dies or its leader moves.
   * @default 30_000 (nats.js's default)
   */
  pullExpiresMs?: number;
  /**
   * Called per message; exceptions are swallowed.
   * @default no reporting
   */
  onEvent?: (event: JetStreamConsumerEvent) => void;
}

export interface JetStreamConsumption {
  /**
   * Stops pulling, lets the batches in hand finish (and be acked), naks what was pulled
   * but not started (so it is redelivered at once), then resolves.
   */
  stop(): Promise<void>;
  /** Settles when consumption ends (after `stop()`, or if the subscription fails). */
  readonly done: Promise<void>;
}
