import type { DeadLetter, ListDeadLettersOptions } from './deadLetters.js';
import type { OutboxBacklog } from './outboxStats.js';

/** The table's backlog plus what this relay did since it was created. */
export interface RelayStats extends OutboxBacklog {
  /** Events this relay published and settled (deleted, or marked sent). */
  published: number;
  /** Publishes of this relay that failed (counted attempts and outages alike). */
  failed: number;
  /** Events this relay dead-lettered. */
  deadLettered: number;
}

/** What one round (`runOnce`) did. */
export interface RelayRound {
  claimed: number;
  published: number;
  /** Failed and scheduled for another try. */
  retried: number;
  deadLettered: number;
  /** Given back unchanged because the publisher was unreachable. */
  released: number;
  /** Settled by another relay after this one's lease ran out. */
  leaseLost: number;
}

export interface Relay {
  /**
   * Starts publishing in the background: rounds back to back while there is work (after a
   * full batch, the next is claimed while it publishes), then a wait of `pollIntervalMs`
   * that a notification cuts short. Resolves once listening.
   */
  start(): Promise<void>;
  /** Stops after the round in flight has published and settled its events. */
  stop(): Promise<void>;
  /** One round: claim a batch, publish it, settle it. For tests and custom schedulers. */
  runOnce(): Promise<RelayRound>;
  stats(): Promise<RelayStats>;
  /** Dead-lettered events, oldest first. */
  deadLetters(options?: ListDeadLettersOptions): Promise<DeadLetter[]>;
  /** Puts dead-lettered events back in line; returns the ids re-driven. */
  redrive(ids: readonly string[]): Promise<string[]>;
  /** Deletes events kept as sent for longer than `retainSentMs`; returns how many. */
  cleanup(): Promise<number>;
  /** True between `start()` and `stop()`. */
  readonly running: boolean;
}
