import type { output } from 'zod/v4/core';
import type { EventDefinitions, EventSchemas, TopicOf } from '../defineEvents.js';
import type { OutboxMessage, Publisher } from '../OutboxMessage.js';

/** A handler per topic; it gets the event with its payload typed by the topic's schema. */
export type InProcessHandlers<TSchemas extends EventSchemas> = {
  [TTopic in TopicOf<TSchemas>]?: (
    event: OutboxMessage<output<TSchemas[TTopic]>, TTopic>,
  ) => Promise<unknown> | unknown;
};

export interface InProcessPublisherOptions<TSchemas extends EventSchemas> {
  /**
   * Parses each payload with its topic's schema before the handler sees it (and types the
   * handlers by topic). A payload that no longer matches fails like a handler error.
   * @default payloads are handed over as stored
   */
  events?: EventDefinitions<TSchemas>;
  /**
   * Treats an event whose topic has no handler as delivered. By default it fails, and is
   * dead-lettered after `maxAttempts`, so a missing handler is noticed instead of silently
   * dropping events.
   * @default false
   */
  ignoreUnknownTopics?: boolean;
}

/**
 * The embedded publisher: "publishing" runs the topic's handler in this process, and the
 * event counts as published when the handler resolves. A handler that throws makes the
 * relay retry with backoff, so handlers must be idempotent: wrap their writes in
 * `idempotentConsumer(…).handle(event, tx => …)`.
 *
 * @example
 * const billing = idempotentConsumer({ db, name: 'billing' });
 * const publisher = inProcessPublisher({
 *   'order.placed': (event) => billing.handle(event, (tx) => createInvoice(tx, event.payload)),
 * }, { events });
 */
export function inProcessPublisher<TSchemas extends EventSchemas = EventSchemas>(
  handlers: NoInfer<InProcessHandlers<TSchemas>>,
  options: InProcessPublisherOptions<TSchemas> = {},
): Publisher {
  return {
    async publish(message) {
      const topic = message.topic as TopicOf<TSchemas>;
      const handler = Object.hasOwn(handlers, topic) ? handlers[topic] : undefined;
      if (!handler) {
        if (options.ignoreUnknownTopics) return;
        throw new Error(
          `inProcessPublisher: no handler for topic "${message.topic}" (event ${message.id}). ` +
            'Add one, or pass { ignoreUnknownTopics: true } to drop such events.',
        );
      }
      const payload = options.events
        ? await options.events.parse(topic, message.payload)
        : message.payload;
      await handler({ ...message, topic, payload } as OutboxMessage<
        output<TSchemas[typeof topic]>,
        typeof topic
      >);
    },
  };
}
