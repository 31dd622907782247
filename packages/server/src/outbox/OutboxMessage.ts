/**
 * An event as relays hand it to a publisher and publishers hand it to consumers: the
 * outbox row's content, without the relay's bookkeeping.
 */
export interface OutboxMessage<TPayload = unknown, TTopic extends string = string> {
  /** The event id (a UUID): consumers deduplicate by it; brokers use it as message id. */
  id: string;
  topic: TTopic;
  /** The aggregate the event belongs to, if `enqueue` was given one. */
  aggregateKey: string | null;
  payload: TPayload;
  headers: Record<string, string>;
  /** When the producing transaction started. */
  createdAt: Date;
}

/** What became of one message of `publishBatch`. */
export type PublishResult = { ok: true } | { ok: false; error: unknown };

/** Where a relay sends events: a broker client, or handlers in the same process. */
export interface Publisher {
  /**
   * Sends one event; resolves once the destination has it (a broker's acknowledgement, or
   * a handler that finished). A relay may send the same event more than once.
   */
  publish(message: OutboxMessage): Promise<void>;
  /**
   * Sends a relay's whole batch at once and says, per message and in the same order,
   * whether the destination has it; one message failing must not fail the others. A
   * publisher that can do better than one `publish` per message (a consumer that commits
   * many events in one transaction) implements it; a rejection fails the whole batch.
   * @default every message through `publish`, concurrently
   */
  publishBatch?(messages: readonly OutboxMessage[]): Promise<PublishResult[]>;
  /**
   * True for an error that says the destination is unreachable (connection lost, timeout)
   * rather than that this event cannot be published. The relay then pauses and retries
   * without counting an attempt, so an outage never dead-letters events.
   * @default every error counts as an attempt
   */
  isTransientError?(error: unknown): boolean;
}
