import { backoffDelay, ConfigurationError, type Random } from '@idem/core';
import type { Consumer, JsMsg } from '@nats-io/jetstream';
import type { output } from 'zod/v4/core';
import type { PgDatabaseLike } from '../../drizzle/PgDatabaseLike.js';
import type { EventDefinitions, EventSchemas, TopicOf } from '../defineEvents.js';
import type { IdempotentConsumer, TransactionOf } from '../inbox/idempotentConsumer.js';
import type { OutboxMessage } from '../OutboxMessage.js';
import { decodeJetStreamMessage } from './decodeJetStreamMessage.js';

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
}

export interface ConsumeJetStreamOptions<
  TDb extends PgDatabaseLike,
  TSchemas extends EventSchemas,
> {
  /**
   * A durable pull consumer with explicit acks: `await js.consumers.get(stream, name)`.
   * Its `ack_wait` is a redelivery delay, so it must not exceed the inbox's
   * `maxRedeliveryDelayMs`.
   */
  consumer: Consumer;
  /** Deduplicates by event id; the handler's writes share its transaction. */
  inbox: IdempotentConsumer<TDb>;
  /** Handles one event; write through `tx` only. Throwing naks the message. */
  handler: (event: DeliveredEvent<TSchemas>, tx: TransactionOf<TDb>) => Promise<unknown>;
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
   * @default 100
   */
  maxMessages?: number;
  /**
   * Called per message; exceptions are swallowed.
   * @default no reporting
   */
  onEvent?: (event: JetStreamConsumerEvent) => void;
}

export interface JetStreamConsumption {
  /** Stops pulling, lets the message in hand finish (and be acked), then resolves. */
  stop(): Promise<void>;
  /** Settles when consumption ends (after `stop()`, or if the subscription fails). */
  readonly done: Promise<void>;
}

/**
 * Feeds a JetStream consumer into an idempotent handler: each message is acknowledged only
 * after the inbox row and the handler's writes committed, and nak'ed with a delay when the
 * handler fails, so JetStream redelivers it; a duplicate is acknowledged without running
 * the handler. Refuses (ConfigurationError) a consumer whose redelivery delays exceed what
 * the inbox's retention was sized for.
 *
 * @example
 * const consumer = await js.consumers.get('ORDERS', 'billing');
 * const consumption = await consumeJetStream({ consumer, inbox: billing, events,
 *   handler: (event, tx) => createInvoice(tx, event.payload) });
 */
export async function consumeJetStream<
  TDb extends PgDatabaseLike,
  TSchemas extends EventSchemas = EventSchemas,
>(options: ConsumeJetStreamOptions<TDb, TSchemas>): Promise<JetStreamConsumption> {
  const { consumer, inbox, handler, events } = options;
  const baseDelayMs = options.nakBackoff?.baseDelayMs ?? 1_000;
  const maxDelayMs = options.nakBackoff?.maxDelayMs ?? 60_000;
  const random = options.nakBackoff?.random ?? Math.random;
  const limit = inbox.maxRedeliveryDelayMs;
  if (maxDelayMs > limit) {
    throw new ConfigurationError(
      `consumeJetStream: nakBackoff.maxDelayMs (${maxDelayMs} ms) is longer than the inbox ` +
        `"${inbox.name}"'s maxRedeliveryDelayMs (${limit} ms), which its retention was sized ` +
        'for. Lower the nak delay or raise maxRedeliveryDelayMs (and retentionMs).',
    );
  }
  const { config } = await consumer.info();
  if (config.ack_policy !== 'explicit') {
    throw new ConfigurationError(
      `consumeJetStream: the consumer's ack_policy is "${config.ack_policy}"; it must be ` +
        '"explicit", or messages would count as handled before the handler committed.',
    );
  }
  const ackWaitMs = (config.ack_wait ?? 30_000_000_000) / 1_000_000;
  const longestBackoffMs = Math.max(0, ...(config.backoff ?? []).map((nanos) => nanos / 1e6));
  const redeliveryMs = Math.max(ackWaitMs, longestBackoffMs);
  if (redeliveryMs > limit) {
    throw new ConfigurationError(
      `consumeJetStream: the consumer redelivers after up to ${redeliveryMs} ms (ack_wait / ` +
        `backoff), longer than the inbox "${inbox.name}"'s maxRedeliveryDelayMs (${limit} ms). ` +
        'Lower the consumer ack_wait or raise maxRedeliveryDelayMs (and retentionMs).',
    );
  }

  const emit = (event: JetStreamConsumerEvent) => {
    try {
      options.onEvent?.(event);
    } catch {
      // Observability must never change the outcome.
    }
  };

  async function handleMessage(message: JsMsg): Promise<void> {
    const deliveryCount = message.info.deliveryCount;
    const decoded = decodeJetStreamMessage(message);
    let event: DeliveredEvent<TSchemas>;
    try {
      if (!decoded.ok) throw decoded.error;
      const payload = events
        ? await events.parse(decoded.message.topic as TopicOf<TSchemas>, decoded.message.payload)
        : decoded.message.payload;
      event = { ...decoded.message, payload, deliveryCount } as DeliveredEvent<TSchemas>;
    } catch (error) {
      message.term();
      emit({ type: 'rejected', subject: message.subject, deliveryCount, error });
      return;
    }
    const base = { subject: message.subject, eventId: event.id, deliveryCount };
    try {
      const result = await inbox.handle(event, (tx) => handler(event, tx));
      // Only now: the inbox row and the handler's writes are committed.
      message.ack();
      emit({ type: result.status, ...base });
    } catch (error) {
      const retryInMs = backoffDelay({
        attempt: Math.max(0, deliveryCount - 1),
        baseDelayMs,
        maxDelayMs,
        random,
      });
      message.nak(Math.round(retryInMs));
      emit({ type: 'failed', ...base, retryInMs, error });
    }
  }

  const messages = await consumer.consume({ max_messages: options.maxMessages ?? 100 });
  const done = (async () => {
    try {
      for await (const message of messages) await handleMessage(message);
    } catch (error) {
      emit({ type: 'error', error });
    }
  })();

  return {
    done,
    async stop() {
      await messages.close();
      await done;
    },
  };
}
