import { type Attributes, SpanKind } from '@opentelemetry/api';
import type { EnqueueEvent } from '../outbox/defineEvents.js';
import type { ConsumerEvent } from '../outbox/inbox/idempotentConsumer.js';
import type { RelayEvent } from '../outbox/relay/RelayEvent.js';
import {
  endedSpan,
  errorTypeOf,
  type InstrumentMaker,
  lazyInstruments,
  type TelemetryOptions,
} from './telemetryProviders.js';

/** Everything the outbox reports: `defineEvents`, `createRelay` and `idempotentConsumer`. */
export type OutboxTelemetryEvent = EnqueueEvent | RelayEvent | ConsumerEvent;

export interface OutboxTelemetry {
  /**
   * Records one event: pass it as `onEvent` to `defineEvents(schemas, { onEvent })`,
   * `createRelay` and `idempotentConsumer`.
   */
  readonly onEvent: (event: OutboxTelemetryEvent) => void;
}

/**
 * OpenTelemetry metrics for the transactional outbox, and a span per delivery a consumer
 * handled, through `@opentelemetry/api` only: without an SDK every call is a no-op.
 *
 * ```ts
 * const outboxMetrics = outboxTelemetry();
 * const { enqueue } = defineEvents(schemas, { onEvent: outboxMetrics.onEvent });
 * const relay = createRelay({ db, publisher, onEvent: outboxMetrics.onEvent });
 * const billing = idempotentConsumer({ db, name: 'billing', onEvent: outboxMetrics.onEvent });
 * ```
 *
 * Metric attributes are the topic (`messaging.destination.name`), the consumer
 * (`messaging.consumer.group.name`), the outcome and `error.type`; never an event id
 * (spans carry it as `messaging.message.id`).
 */
export function outboxTelemetry(options: TelemetryOptions = {}): OutboxTelemetry {
  const instruments = lazyInstruments(options, outboxInstruments);
  const onEvent = (event: OutboxTelemetryEvent) => {
    try {
      record(instruments(), event);
    } catch {
      // Telemetry must never stop a relay or fail a consumer.
    }
  };
  return { onEvent };
}

type OutboxInstruments = ReturnType<typeof outboxInstruments>;

function outboxInstruments({ counter, durations, tracer }: InstrumentMaker) {
  return {
    tracer,
    enqueued: counter(
      'idem.outbox.enqueued',
      '{event}',
      'Events written to the outbox (in the producing transaction).',
    ),
    published: counter(
      'idem.outbox.published',
      '{event}',
      'Events a relay published and settled (deleted, or marked sent with retainSentMs).',
    ),
    retries: counter(
      'idem.outbox.retries',
      '{retry}',
      'Failed publishes that will be retried after a backoff.',
    ),
    deadLettered: counter(
      'idem.outbox.dead_lettered',
      '{event}',
      'Events that failed maxAttempts times and were dead-lettered.',
    ),
    publishLag: durations(
      'idem.outbox.publish.lag',
      'Time from the producing transaction to the relay settling the event.',
    ),
    handled: counter(
      'idem.inbox.handled',
      '{event}',
      'Deliveries handled by an idempotent consumer: processed, duplicate or failed.',
    ),
    consumeLag: durations(
      'idem.outbox.consume.lag',
      "Time from the producing transaction to the commit of a consumer's handling of the event.",
    ),
  };
}

function record(metrics: OutboxInstruments, event: OutboxTelemetryEvent): void {
  switch (event.type) {
    case 'enqueued':
      metrics.enqueued.add(1, topic(event.topic));
      return;
    case 'published': {
      const attributes = topic(event.topic);
      metrics.published.add(1, attributes);
      metrics.publishLag.recordMs(event.lagMs, attributes);
      return;
    }
    case 'publish_failed':
      metrics.retries.add(1, { ...topic(event.topic), 'error.type': errorTypeOf(event.error) });
      return;
    case 'dead_lettered':
      metrics.deadLettered.add(1, {
        ...topic(event.topic),
        'error.type': errorTypeOf(event.error),
      });
      return;
    case 'processed':
    case 'duplicate':
    case 'failed':
      recordHandled(metrics, event);
      return;
  }
}

/** A consumer's handling: counted by outcome, its lag once committed, and a span. */
function recordHandled(metrics: OutboxInstruments, event: ConsumerEvent): void {
  const attributes: Attributes = { 'messaging.consumer.group.name': event.consumer };
  if (event.topic !== undefined) attributes['messaging.destination.name'] = event.topic;
  const handled: Attributes = { ...attributes, 'idem.outcome': event.type };
  if (event.error !== undefined) handled['error.type'] = errorTypeOf(event.error);
  metrics.handled.add(1, handled);
  if (event.type === 'processed' && event.lagMs !== undefined) {
    metrics.consumeLag.recordMs(event.lagMs, attributes);
  }
  endedSpan(metrics.tracer, {
    name: event.topic === undefined ? 'process' : `process ${event.topic}`,
    kind: SpanKind.CONSUMER,
    durationMs: event.durationMs,
    attributes: {
      ...handled,
      'messaging.operation.type': 'process',
      'messaging.operation.name': 'process',
      'messaging.message.id': event.eventId,
      ...(event.batchSize !== undefined && {
        'messaging.batch.message_count': event.batchSize,
      }),
    },
    ...(event.type === 'failed' && { error: event.error }),
  });
}

const topic = (name: string): Attributes => ({ 'messaging.destination.name': name });
