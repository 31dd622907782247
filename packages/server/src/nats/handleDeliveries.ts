import { backoffDelay } from '@idem/core';
import type { JsMsg } from '@nats-io/jetstream';
import type { EventDefinitions, EventSchemas, TopicOf } from '../outbox/defineEvents.js';
import type { IdempotentConsumer } from '../outbox/inbox/idempotentConsumer.js';
import type { PgDatabaseLike } from '../postgres/PgDatabaseLike.js';
import type { DeliveredEvent, JetStreamConsumerEvent } from './ConsumeJetStreamOptions.js';
import type { ConsumeSettings } from './consumeSettings.js';
import { decodeJetStreamMessage } from './decodeJetStreamMessage.js';

/** What handling a batch of JetStream messages needs. */
export interface DeliveryContext<TDb extends PgDatabaseLike, TSchemas extends EventSchemas> {
  inbox: IdempotentConsumer<TDb>;
  events: EventDefinitions<TSchemas> | undefined;
  settings: ConsumeSettings<TDb, TSchemas>;
  emit: (event: JetStreamConsumerEvent) => void;
}

/**
 * Handles a batch in the inbox, then acks each message whose event committed (processed or
 * duplicate) and naks each failed one with a backoff by its delivery count. A message that
 * is not an event (no id, not JSON, a payload its schema refuses) is terminated. Throws only
 * for a failure that is no handler's (the inbox's own), leaving the batch to the caller.
 */
export async function handleDeliveries<TDb extends PgDatabaseLike, TSchemas extends EventSchemas>(
  context: DeliveryContext<TDb, TSchemas>,
  messages: readonly JsMsg[],
): Promise<void> {
  const { inbox, settings, emit } = context;
  const decoded = await Promise.all(messages.map((message) => decode(context, message)));
  const ready = messages.flatMap((message, index) => {
    const event = decoded[index];
    return event ? [{ message, event }] : [];
  });
  if (ready.length === 0) return;
  const results = await inbox.handleBatch(
    ready.map(({ event }) => event),
    settings.batchHandler,
  );
  const batchSize = settings.reportsBatches ? { batchSize: ready.length } : {};
  ready.forEach(({ message, event }, index) => {
    const result = results[index];
    if (!result) return;
    const base = {
      subject: message.subject,
      eventId: event.id,
      deliveryCount: event.deliveryCount,
      ...batchSize,
    };
    if (result.status !== 'failed') {
      // Only now: the inbox row and the handler's writes are committed.
      settle(() => message.ack());
      emit({ type: result.status, ...base });
      return;
    }
    const retryInMs = backoffDelay({
      attempt: Math.max(0, event.deliveryCount - 1),
      ...settings.nakBackoff,
    });
    settle(() => message.nak(Math.round(retryInMs)));
    emit({ type: 'failed', ...base, retryInMs, error: result.error });
  });
}

/** The message as the handler's event, or `undefined` once it was terminated. */
async function decode<TDb extends PgDatabaseLike, TSchemas extends EventSchemas>(
  { events, emit }: DeliveryContext<TDb, TSchemas>,
  message: JsMsg,
): Promise<DeliveredEvent<TSchemas> | undefined> {
  const deliveryCount = message.info.deliveryCount;
  const decoded = decodeJetStreamMessage(message);
  try {
    if (!decoded.ok) throw decoded.error;
    const payload = events
      ? await events.parse(decoded.message.topic as TopicOf<TSchemas>, decoded.message.payload)
      : decoded.message.payload;
    return { ...decoded.message, payload, deliveryCount } as DeliveredEvent<TSchemas>;
  } catch (error) {
    settle(() => message.term());
    emit({ type: 'rejected', subject: message.subject, deliveryCount, error });
    return undefined;
  }
}

/**
 * Acks, naks and terms are best effort: on a closed connection they throw, and the message
 * comes back after `ack_wait` anyway (the inbox catches a copy that was already handled).
 */
export function settle(reply: () => void): void {
  try {
    reply();
  } catch {
    // Redelivery covers it.
  }
}
