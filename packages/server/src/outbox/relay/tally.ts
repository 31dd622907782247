import type { ClaimedEvent } from './claimBatch.js';
import type { PublishAttempt } from './publishClaimed.js';
import type { RelayRound, RelayStats } from './Relay.js';
import type { RelayEvent } from './RelayEvent.js';

/** What a round is counted from: its claim, each event's publish, and what settled. */
export interface RoundInput {
  claimed: readonly ClaimedEvent[];
  /** One per claimed event, in the same order. */
  attempts: readonly PublishAttempt[];
  /** The ids settled under this round's lease; the others were taken over. */
  settled: ReadonlySet<string>;
  /** When the round settled: a published event's lag ends here. */
  nowMs: number;
}

/** A round, counted. */
export interface RoundTally {
  /** What `runOnce` answers. */
  round: RelayRound;
  /** Publishes that failed, counted attempts and outages alike, settled or not. */
  failed: number;
  /** The error of the last event given back because the publisher was unreachable. */
  unreachableError: unknown;
  /** What the relay reports for the round, in order. */
  events: RelayEvent[];
}

/** What a relay did since it was created: its part of `stats()`. */
export type RelayTotals = Pick<RelayStats, 'published' | 'failed' | 'deadLettered'>;

export const NO_TOTALS: RelayTotals = { published: 0, failed: 0, deadLettered: 0 };

/**
 * Counts a round: what became of each event (published, retried, dead-lettered, given back
 * unchanged, or lost with its lease), and the events that report it. Pure.
 */
export function tally({ claimed, attempts, settled, nowMs }: RoundInput): RoundTally {
  const round: RelayRound = {
    claimed: claimed.length,
    published: 0,
    retried: 0,
    deadLettered: 0,
    released: 0,
    leaseLost: 0,
  };
  const events: RelayEvent[] = [];
  const lost: string[] = [];
  let failed = 0;
  let unreachableError: unknown;
  claimed.forEach((event, index) => {
    const attempt = attempts[index];
    if (!attempt) return;
    const { settlement, error } = attempt;
    const { id, topic, createdAt } = event.message;
    if (settlement.outcome !== 'sent') failed++;
    if (!settled.has(id)) {
      lost.push(id);
      return;
    }
    switch (settlement.outcome) {
      case 'sent': {
        round.published++;
        const lagMs = Math.max(0, nowMs - createdAt.getTime());
        events.push({ type: 'published', id, topic, attempts: event.attempts, lagMs });
        break;
      }
      case 'retry':
        round.retried++;
        events.push({
          type: 'publish_failed',
          id,
          topic,
          attempts: event.attempts + 1,
          retryInMs: settlement.delayMs,
          error,
        });
        break;
      case 'dead':
        round.deadLettered++;
        events.push({ type: 'dead_lettered', id, topic, attempts: event.attempts + 1, error });
        break;
      case 'release':
        round.released++;
        unreachableError = error;
        break;
    }
  });
  round.leaseLost = lost.length;
  if (lost.length > 0) events.push({ type: 'lease_lost', ids: lost });
  return { round, failed, unreachableError, events };
}

/** The totals after one more round. */
export const addTally = (totals: RelayTotals, { round, failed }: RoundTally): RelayTotals => ({
  published: totals.published + round.published,
  failed: totals.failed + failed,
  deadLettered: totals.deadLettered + round.deadLettered,
});

/** The publisher was unreachable for the whole round. */
export const isOutage = (round: RelayRound) => round.released > 0 && round.published === 0;
