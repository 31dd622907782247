import { ConfigurationError, type Random } from '@idem/core';
import { requirePositive } from '@idem/core/store';
import type { ConsumerConfig } from '@nats-io/jetstream';
import type { EventSchemas } from '../outbox/defineEvents.js';
import type { IdempotentConsumer, TransactionOf } from '../outbox/inbox/idempotentConsumer.js';
import type { PgDatabaseLike } from '../postgres/PgDatabaseLike.js';
import type { ConsumeJetStreamOptions, DeliveredEvent } from './ConsumeJetStreamOptions.js';

/** `consumeJetStream`'s options, checked, with their defaults. */
export interface ConsumeSettings<TDb extends PgDatabaseLike, TSchemas extends EventSchemas> {
  /** `batchHandler`, or one that runs `handler` per event. */
  batchHandler: (events: DeliveredEvent<TSchemas>[], tx: TransactionOf<TDb>) => Promise<unknown>;
  /** The reports carry `batchSize` (the caller gave a `batchHandler`). */
  reportsBatches: boolean;
  maxBatch: number;
  concurrency: number;
  maxMessages: number;
  nakBackoff: { baseDelayMs: number; maxDelayMs: number; random: Random };
}

/** Checks the options (ConfigurationError) and fills in the defaults. */
export function consumeSettings<TDb extends PgDatabaseLike, TSchemas extends EventSchemas>(
  options: ConsumeJetStreamOptions<TDb, TSchemas>,
): ConsumeSettings<TDb, TSchemas> {
  const { inbox, handler } = options;
  if ((handler === undefined) === (options.batchHandler === undefined)) {
    throw new ConfigurationError(
      'consumeJetStream: give exactly one of `handler` (one event per transaction) and ' +
        '`batchHandler` (many events per transaction).',
    );
  }
  const maxBatch = positiveInteger('maxBatch', options.maxBatch ?? (handler ? 1 : 100));
  const concurrency = positiveInteger('concurrency', options.concurrency ?? 1);
  const maxMessages = positiveInteger(
    'maxMessages',
    options.maxMessages ?? Math.max(100, 2 * maxBatch * concurrency),
  );
  const nakBackoff = {
    baseDelayMs: options.nakBackoff?.baseDelayMs ?? 1_000,
    maxDelayMs: options.nakBackoff?.maxDelayMs ?? 60_000,
    random: options.nakBackoff?.random ?? Math.random,
  };
  if (nakBackoff.maxDelayMs > inbox.maxRedeliveryDelayMs) {
    throw new ConfigurationError(
      `consumeJetStream: nakBackoff.maxDelayMs (${nakBackoff.maxDelayMs} ms) is longer than the inbox ` +
        `"${inbox.name}"'s maxRedeliveryDelayMs (${inbox.maxRedeliveryDelayMs} ms), which its retention was sized ` +
        'for. Lower the nak delay or raise maxRedeliveryDelayMs (and retentionMs).',
    );
  }
  return {
    batchHandler:
      options.batchHandler ??
      (async (batch, tx) => {
        for (const event of batch) await handler?.(event, tx);
      }),
    reportsBatches: options.batchHandler !== undefined,
    maxBatch,
    concurrency,
    maxMessages,
    nakBackoff,
  };
}

/**
 * Refuses a consumer that would count messages as handled before the handler committed,
 * could never fill the batches in flight, or redelivers later than the inbox remembers.
 */
export function checkConsumerConfig(
  config: Pick<ConsumerConfig, 'ack_policy' | 'max_ack_pending' | 'ack_wait' | 'backoff'>,
  settings: Pick<ConsumeSettings<never, EventSchemas>, 'maxBatch' | 'concurrency'>,
  inbox: Pick<IdempotentConsumer, 'name' | 'maxRedeliveryDelayMs'>,
): void {
  const { maxBatch, concurrency } = settings;
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
  const limit = inbox.maxRedeliveryDelayMs;
  if (redeliveryMs > limit) {
    throw new ConfigurationError(
      `consumeJetStream: the consumer redelivers after up to ${redeliveryMs} ms (ack_wait / ` +
        `backoff), longer than the inbox "${inbox.name}"'s maxRedeliveryDelayMs (${limit} ms). ` +
        'Lower the consumer ack_wait or raise maxRedeliveryDelayMs (and retentionMs).',
    );
  }
}

const positiveInteger = (name: string, value: number) =>
  requirePositive(`consumeJetStream: ${name}`, value, { integer: true });
