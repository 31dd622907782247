import { notifyObserver } from '@idem/core/store';
import type { ConsumerMessages, JsMsg } from '@nats-io/jetstream';
import type { EventSchemas } from '../outbox/defineEvents.js';
import type { PgDatabaseLike } from '../postgres/PgDatabaseLike.js';
import type {
  ConsumeJetStreamOptions,
  JetStreamConsumerEvent,
  JetStreamConsumption,
} from './ConsumeJetStreamOptions.js';
import { checkConsumerConfig, consumeSettings } from './consumeSettings.js';
import { type DeliveryContext, handleDeliveries, settle } from './handleDeliveries.js';
import { createFlow, type Flow } from './jetStreamFlow.js';

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
  const { consumer, inbox, events } = options;
  const settings = consumeSettings(options);
  const { config } = await consumer.info();
  checkConsumerConfig(config, settings, inbox);
  const emit = (event: JetStreamConsumerEvent) => notifyObserver(options.onEvent, event);
  const context: DeliveryContext<TDb, TSchemas> = { inbox, events, settings, emit };

  const messages = await consumer.consume({
    max_messages: settings.maxMessages,
    ...(options.pullExpiresMs === undefined ? {} : { expires: options.pullExpiresMs }),
  });
  const flow = createFlow<JsMsg>(settings);
  const worker = async () => {
    for (let batch = await flow.take(); batch; batch = await flow.take()) {
      try {
        await handleDeliveries(context, batch);
      } catch (error) {
        // Not a handler's failure (those are per message): leave the batch to redelivery.
        for (const message of batch) settle(() => message.nak());
        emit({ type: 'error', error });
      } finally {
        flow.finished(batch);
      }
    }
  };
  const done = (async () => {
    await Promise.all([
      pull(messages, flow, emit),
      ...Array.from({ length: settings.concurrency }, worker),
    ]);
    // Pulled but never started: back to the stream at once rather than after ack_wait.
    for (const message of flow.drain()) settle(() => message.nak());
  })();

  return {
    done,
    async stop() {
      flow.stop();
      await messages.close();
      await done;
    },
  };
}

/** Feeds the subscription into the flow; once stopping, what still arrives goes back. */
async function pull(
  messages: ConsumerMessages,
  flow: Flow<JsMsg>,
  emit: (event: JetStreamConsumerEvent) => void,
): Promise<void> {
  try {
    for await (const message of messages) {
      if (flow.state().status === 'stopping') {
        settle(() => message.nak());
        continue;
      }
      const room = flow.push(message);
      if (room) await room;
    }
  } catch (error) {
    emit({ type: 'error', error });
  } finally {
    flow.pulled();
  }
}
