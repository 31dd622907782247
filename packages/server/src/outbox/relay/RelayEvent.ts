/** What a relay reports for logs and metrics. */
export type RelayEvent =
  /** Published and settled. `lagMs`: from the producing transaction to now. */
  | { type: 'published'; id: string; topic: string; attempts: number; lagMs: number }
  /** A publish failed and counts as an attempt; the next try is in `retryInMs`. */
  | {
      type: 'publish_failed';
      id: string;
      topic: string;
      attempts: number;
      retryInMs: number;
      error: unknown;
    }
  /** The event failed `maxAttempts` times and was dead-lettered. */
  | { type: 'dead_lettered'; id: string; topic: string; attempts: number; error: unknown }
  /**
   * The publisher was unreachable for a whole batch: the events went back unchanged and
   * the relay pauses `retryInMs` (`consecutive`: batches in a row).
   */
  | { type: 'publisher_unavailable'; consecutive: number; retryInMs: number; error: unknown }
  /** The lease on these events ran out before they were settled; another relay has them. */
  | { type: 'lease_lost'; ids: string[] }
  /** Sent events older than `retainSentMs` were deleted. */
  | { type: 'cleaned_up'; deleted: number }
  /**
   * A database error in the loop; the relay retries after `retryInMs`. `retryInMs` 0: the
   * round that was publishing beside a failed one (or at `stop()`) failed to settle too;
   * its events come back when their lease ends.
   */
  | { type: 'error'; error: unknown; retryInMs: number };

export type RelayEventType = RelayEvent['type'];
