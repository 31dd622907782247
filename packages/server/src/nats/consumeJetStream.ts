import { backoffDelay, ConfigurationError } from '@idem/core';
import { notifyObserver, requirePositive } from '@idem/core/store';
import type { JsMsg } from '@nats-io/jetstream';
import type { EventSchemas, TopicOf } from '../outbox/defineEvents.js';
import type { BatchItemResult } from '../outbox/inbox/handleBatch.js';
import type { TransactionOf } from '../outbox/inbox/idempotentConsumer.js';
import type { PgDatabaseLike } from '../postgres/PgDatabaseLike.js';
import type {
  ConsumeJetStreamOptions,
  DeliveredEvent,
  JetStreamConsumerEvent,
  JetStreamConsumption,
} from './ConsumeJetStreamOptions.js';
import { decodeJetStreamMessage } from './decodeJetStreamMessage.js';

/**
 * Feeds a JetStream consumer into an idempotent handler: each message is acknowledged only
 * after the inbox row and the handler's writes committed, and nak'ed with a delay when the
 * handler fails, so JetStream redelivers it; a duplicate is acknowledged without running
 * the handler. With `batchHandler`, the messages that have arrived are handled together,
 * one transaction per batch. Refuses (ConfigurationError) a consumer whose redelivery
 * delays exceed what the inbox's retention was sized for, or whose `max_ack_pending` is
 * below `maxBatch × concurrency`.
 *
 * @example
 * const consumer = await js.consumers.get('ORDERS', 'billing');
 * const consumption = await consumeJetStream({ consumer, inbox: billing, events,
 *   batchHandler: (events, tx) => createInvoices(tx, events) });
 */
export async function consumeJetStream<
  TDb extends PgDatabaseLike,
  TSchemas extends EventSchemas = EventSchemas,
>(options: ConsumeJetStreamOptions<TDb, TSchemas>): Promise<JetStreamConsumption> {
  const { consumer, inbox, handler, events } = options;
  if ((handler === undefined) === (options.batchHandler === undefined)) {
    throw new ConfigurationError(
      'consumeJetStream: give exactly one of `handler` (one event per transaction) and ' +
        '`batchHandler` (many events per transaction).',
    );
  }
  const batchHandler =
    options.batchHandler ??
    (async (batch: DeliveredEvent<TSchemas>[], tx: TransactionOf<TDb>) => {
      for (const event of batch) await handler?.(event, tx);
    });
  const maxBatch = positiveInteger('maxBatch', options.maxBatch ?? (handler ? 1 : 100));
  const concurrency = positiveInteger('concurrency', options.concurrency ?? 1);
  const maxMessages = positiveInteger(
    'maxMessages',
    options.maxMessages ?? Math.max(100, 2 * maxBatch * concurrency),
  );
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
  const maxAckPending = config.max_ack_pending ?? -1;
  if (maxAckPending > 0 && maxAckPending < maxBatch * concurrency) {
    throw new ConfigurationError(
      `consumeJetStream: the consumer's max_ack_pending (${maxAckPending}) is below maxBatch × ` +
        `concurrency (${maxBatch} × ${concurrency}). JetStream stops delivering once that many ` +
        'messages await their ack, so the batches in flight could never fill: raise the ' +
        "consumer's max_ack_pending (JetStream's default is 1,000) or lower maxBatch or concurrency.",
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

  const emit = (event: JetStreamConsumerEvent) => notifyObserver(options.onEvent, event);

  /** The message as the handler's event, or `undefined` once it was terminated. */
  async function decode(message: JsMsg): Promise<DeliveredEvent<TSchemas> | undefined> {
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

  async function handleBatch(messages: JsMsg[]): Promise<void> {
    const decoded = await Promise.all(messages.map(decode));
    const ready = messages.flatMap((message, index) => {
      const event = decoded[index];
      return event ? [{ message, event }] : [];
    });
    if (ready.length === 0) return;
    const results: BatchItemResult[] = await inbox.handleBatch(
      ready.map(({ event }) => event),
      batchHandler,
    );
    const batchSize = options.batchHandler ? { batchSize: ready.length } : {};
    results.forEach((result, index) => {
      const { message, event } = ready[index] as (typeof ready)[number];
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
        baseDelayMs,
        maxDelayMs,
        random,
      });
      settle(() => message.nak(Math.round(retryInMs)));
      emit({ type: 'failed', ...base, retryInMs, error: result.error });
    });
  }

  const messages = await consumer.consume({
    max_messages: maxMessages,
    ...(options.pullExpiresMs === undefined ? {} : { expires: options.pullExpiresMs }),
  });
  const queue: JsMsg[] = [];
  let stopping = false;
  let pulled = false; // the subscription ended
  /**
   * A batch smaller than `maxBatch` is being handled. While it is, another partial batch
   * does not start: the messages that arrive meanwhile wait for it (or for a full batch) and
   * go together in the next transaction, as a database's group commit does. Without this,
   * under a steady flow every idle worker took the one or two messages that had just
   * arrived, and most transactions were tiny. A lone message still starts at once.
   */
  let partialInFlight = false;
  const wakeWorkers: (() => void)[] = [];
  let wakePuller: (() => void) | undefined;
  const signalWorkers = () => {
    for (const wake of wakeWorkers.splice(0)) wake();
  };
  /** There is a batch a worker may start now. */
  const batchReady = () =>
    queue.length >= maxBatch || (queue.length > 0 && (!partialInFlight || pulled));

  const puller = (async () => {
    try {
      for await (const message of messages) {
        if (stopping) {
          settle(() => message.nak());
          continue;
        }
        queue.push(message);
        if (batchReady()) signalWorkers();
        if (queue.length >= maxMessages) {
          await new Promise<void>((resolve) => {
            wakePuller = resolve;
          });
        }
      }
    } catch (error) {
      emit({ type: 'error', error });
    } finally {
      pulled = true;
      signalWorkers();
    }
  })();

  const worker = async () => {
    for (;;) {
      while (!batchReady() && !(pulled && queue.length === 0) && !stopping) {
        await new Promise<void>((resolve) => {
          wakeWorkers.push(resolve);
        });
      }
      if (stopping || queue.length === 0) return;
      const batch = queue.splice(0, maxBatch);
      const partial = batch.length < maxBatch;
      if (partial) partialInFlight = true;
      wakePuller?.();
      wakePuller = undefined;
      try {
        await handleBatch(batch);
      } catch (error) {
        // Not a handler's failure (those are per message): leave the batch to redelivery.
        for (const message of batch) settle(() => message.nak());
        emit({ type: 'error', error });
      } finally {
        if (partial) {
          partialInFlight = false;
          if (batchReady()) signalWorkers();
        }
      }
    }
  };

  const done = (async () => {
    await Promise.all([puller, ...Array.from({ length: concurrency }, worker)]);
    // Pulled but never started: back to the stream at once rather than after ack_wait.
    for (const message of queue.splice(0)) settle(() => message.nak());
  })();

  return {
    done,
    async stop() {
      stopping = true;
      signalWorkers();
      wakePuller?.();
      wakePuller = undefined;
      await messages.close();
      await done;
    },
  };
}

/**
 * Acks, naks and terms are best effort: on a closed connection they throw, and the message
 * comes back after `ack_wait` anyway (the inbox catches a copy that was already handled).
 */
function settle(reply: () => void): void {
  try {
    reply();
  } catch {
    // Redelivery covers it.
  }
}

const positiveInteger = (name: string, value: number) =>
  requirePositive(`consumeJetStream: ${name}`, value, { integer: true });
