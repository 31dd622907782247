/** What `handle` did, for logs and metrics. */
export interface ConsumerEvent {
  type: 'processed' | 'duplicate' | 'failed';
  consumer: string;
  eventId: string;
  durationMs: number;
  /** Why the handler failed (its transaction was rolled back). */
  error?: unknown;
  /** The event's topic, when the delivered event carries one (an `OutboxMessage` does). */
  topic?: string;
  /**
   * `processed` only: from the producing transaction (the event's `createdAt`) to this
   * handling's commit, when the delivered event carries `createdAt`.
   */
  lagMs?: number;
  /** From `handleBatch`: how many events the batch had (`durationMs` is the batch's). */
  batchSize?: number;
}

/** `processed`: the handler ran and committed. `duplicate`: it ran before; skipped. */
export type HandleResult<T> = { status: 'processed'; value: T } | { status: 'duplicate' };
