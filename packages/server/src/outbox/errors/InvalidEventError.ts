import { IdempotencyError, type IdempotencyErrorOptions } from '@idem/core';
import { guardFor } from '@idem/core/store';

/** One problem found by the topic's schema, with a dotted path into the payload. */
export interface EventIssue {
  /** Where in the payload, e.g. `items.0.sku`; empty for the payload itself. */
  path: string;
  message: string;
}

/** Why `enqueue` refused an event. */
export type InvalidEventReason =
  | 'unknown_topic'
  | 'invalid_payload'
  | 'payload_too_large'
  | 'unserializable_payload'
  | 'invalid_headers'
  | 'invalid_aggregate_key';

/**
 * `enqueue` refused an event before writing anything: its topic is not defined, its
 * payload fails the topic's schema or is too large, or its headers are not strings.
 */
export class InvalidEventError extends IdempotencyError {
  readonly reason: InvalidEventReason;
  readonly topic: string;
  /** The event's position when a list was enqueued (0 for a single event). */
  readonly index: number;
  /** The schema's findings, for `invalid_payload`. */
  readonly issues: readonly EventIssue[];

  constructor(
    details: {
      reason: InvalidEventReason;
      topic: string;
      index: number;
      issues?: readonly EventIssue[];
    },
    message: string,
    options?: IdempotencyErrorOptions,
  ) {
    super('INVALID_EVENT', message, options);
    this.name = 'InvalidEventError';
    this.reason = details.reason;
    this.topic = details.topic;
    this.index = details.index;
    this.issues = details.issues ?? [];
  }
}

/** Recognises an `InvalidEventError` by brand and code, even from another copy of idem. */
export const isInvalidEventError = guardFor<InvalidEventError>('INVALID_EVENT');
