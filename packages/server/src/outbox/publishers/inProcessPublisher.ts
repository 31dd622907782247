import type { output } from 'zod/v4/core';
import type { EventDefinitions, EventSchemas, TopicOf } from '../defineEvents.js';
import type { OutboxMessage, Publisher, PublishResult } from '../OutboxMessage.js';

type TopicMessage<TSchemas extends EventSchemas, TTopic extends TopicOf<TSchemas>> = OutboxMessage<
  output<TSchemas[TTopic]>,
  TTopic
>;

/**
 * What a batch handler says about each event it was given: `failed` ones (with `error`)
 * are retried by the relay one by one; any other status counts as delivered.
 * `idempotentConsumer(…).handleBatch` returns exactly this.
 */
export interface InProcessBatchResult {
  id: string;
  status: string;
  error?: unknown;
}

/**
 * A topic's handler for whole batches: it gets every event of the relay's batch with its
 * topic at once (so one consumer transaction can take them all), and returns a result per
 * event, or nothing when all were handled; a throw fails them all.
 */
export interface InProcessBatchHandler<TEvent> {
  // biome-ignore lint/suspicious/noConfusingVoidType: an async handler that returns nothing says "all handled".
  batch: (events: TEvent[]) => Promise<readonly InProcessBatchResult[] | undefined | void>;
}

/**
 * A handler per topic; it gets the event with its payload typed by the topic's schema. A
 * topic may instead have `{ batch: (events) => … }`, which gets the relay's batch at once.
 */
export type InProcessHandlers<TSchemas extends EventSchemas> = {
  [TTopic in TopicOf<TSchemas>]?:
    | ((event: TopicMessage<TSchemas, TTopic>) => Promise<unknown> | unknown)
    | InProcessBatchHandler<TopicMessage<TSchemas, TTopic>>;
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

type AnyHandler =
  | ((event: OutboxMessage) => Promise<unknown> | unknown)
  | InProcessBatchHandler<OutboxMessage>;

/** How the publisher finds a topic's handler and reads a payload. */
interface Routing {
  handlerOf(topic: string): AnyHandler | undefined;
  /** The message with its payload parsed by its topic's schema, if `events` were given. */
  parse(message: OutboxMessage): Promise<OutboxMessage>;
  ignoreUnknownTopics: boolean;
}

/**
 * The embedded publisher: "publishing" runs the topic's handler in this process, and the
 * event counts as published when the handler resolves. A handler that throws makes the
 * relay retry with backoff, so handlers must be idempotent: wrap their writes in
 * `idempotentConsumer(…).handle(event, tx => …)`, or, for a batch handler,
 * `handleBatch(events, (fresh, tx) => …)`.
 *
 * @example
 * const billing = idempotentConsumer({ db, name: 'billing' });
 * const publisher = inProcessPublisher({
 *   'order.placed': { batch: (placed) => billing.handleBatch(placed, (fresh, tx) => createInvoices(tx, fresh)) },
 * }, { events });
 */
export function inProcessPublisher<TSchemas extends EventSchemas = EventSchemas>(
  handlers: NoInfer<InProcessHandlers<TSchemas>>,
  options: InProcessPublisherOptions<TSchemas> = {},
): Publisher {
  const routing: Routing = {
    handlerOf: (topic) =>
      Object.hasOwn(handlers, topic)
        ? (handlers[topic as TopicOf<TSchemas>] as AnyHandler | undefined)
        : undefined,
    async parse(message) {
      if (!options.events) return message;
      const topic = message.topic as TopicOf<TSchemas>;
      return { ...message, payload: await options.events.parse(topic, message.payload) };
    },
    ignoreUnknownTopics: options.ignoreUnknownTopics ?? false,
  };
  const publishBatch = (messages: readonly OutboxMessage[]) => publishAll(routing, messages);
  return {
    async publish(message) {
      const [result] = await publishBatch([message]);
      if (result && !result.ok) throw result.error;
    },
    publishBatch,
  };
}

/** A relay's batch, topic by topic (each topic's handler runs beside the others'). */
async function publishAll(
  routing: Routing,
  messages: readonly OutboxMessage[],
): Promise<PublishResult[]> {
  const results: PublishResult[] = messages.map(() => ({ ok: true }));
  const byTopic = new Map<string, { index: number; message: OutboxMessage }[]>();
  messages.forEach((message, index) => {
    const group = byTopic.get(message.topic) ?? [];
    group.push({ index, message });
    byTopic.set(message.topic, group);
  });
  await Promise.all(
    [...byTopic].map(async ([topic, group]) => {
      const handler = routing.handlerOf(topic);
      const outcome = await publishTopic(
        routing,
        handler,
        group.map(({ message }) => message),
      );
      group.forEach(({ index }, at) => {
        const result = outcome[at];
        if (result) results[index] = result;
      });
    }),
  );
  return results;
}

/** One topic's messages through its handler: results in the same order. */
async function publishTopic(
  routing: Routing,
  handler: AnyHandler | undefined,
  messages: readonly OutboxMessage[],
): Promise<PublishResult[]> {
  if (!handler) {
    return messages.map((message) =>
      routing.ignoreUnknownTopics ? { ok: true } : { ok: false, error: noHandler(message) },
    );
  }
  if (typeof handler !== 'function') return runBatch(routing, handler, messages);
  return Promise.all(
    messages.map(async (message): Promise<PublishResult> => {
      try {
        await handler(await routing.parse(message));
        return { ok: true };
      } catch (error) {
        return { ok: false, error };
      }
    }),
  );
}

/** Runs one topic's batch handler on the messages whose payload parsed; results in order. */
async function runBatch(
  routing: Routing,
  handler: InProcessBatchHandler<OutboxMessage>,
  messages: readonly OutboxMessage[],
): Promise<PublishResult[]> {
  const results: PublishResult[] = messages.map(() => ({ ok: true }));
  const parsed = await Promise.all(
    messages.map(async (message, index) => {
      try {
        return { index, event: await routing.parse(message) };
      } catch (error) {
        results[index] = { ok: false, error };
        return undefined;
      }
    }),
  );
  const ready = parsed.filter((entry) => entry !== undefined);
  if (ready.length === 0) return results;
  let reported: Awaited<ReturnType<typeof handler.batch>>;
  try {
    reported = await handler.batch(ready.map(({ event }) => event));
  } catch (error) {
    for (const { index } of ready) results[index] = { ok: false, error };
    return results;
  }
  if (!reported) return results;
  const byId = new Map(reported.map((result) => [result.id, result]));
  for (const { index, event } of ready) {
    const result = byId.get(event.id);
    if (!result) {
      results[index] = {
        ok: false,
        error: new Error(
          `inProcessPublisher: the batch handler of "${event.topic}" returned no result for event ${event.id}.`,
        ),
      };
    } else if (result.status === 'failed') {
      results[index] = { ok: false, error: result.error };
    }
  }
  return results;
}

const noHandler = (message: OutboxMessage) =>
  new Error(
    `inProcessPublisher: no handler for topic "${message.topic}" (event ${message.id}). ` +
      'Add one, or pass { ignoreUnknownTopics: true } to drop such events.',
  );
