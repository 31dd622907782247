import { backoffDelay, type Random } from '@idem/core';
import type { RelayEvent } from './RelayEvent.js';
import { isOutage, type RoundTally } from './tally.js';

/**
 * `stopped` → `start()` → `starting` (subscribing to NOTIFY) → `running` → `stop()` →
 * `stopping` (the rounds in flight settle) → `stopped`.
 */
export type RelayStatus = 'stopped' | 'starting' | 'running' | 'stopping';

/** The relay loop's one state: everything it decides its next wait from. */
export interface LoopState {
  status: RelayStatus;
  /**
   * A NOTIFY (or a redrive) came since the last claim: it may be for a commit that claim
   * did not see, so it cuts the next idle wait short.
   */
  notified: boolean;
  /** Database errors in a row: the backoff before the next turn grows with them. */
  errors: number;
  /** Rounds in a row the publisher was unreachable for: the pause grows with them. */
  outages: number;
  /** The last idle wait: `minPollIntervalMs` after a round that found events, then doubling. */
  pollWaitMs: number;
}

/** What the loop does before its next turn. */
export type Wait =
  /** Claims again at once. */
  | { type: 'none' }
  /** Idle: looks again after `delayMs`, or at a NOTIFY. */
  | { type: 'poll'; delayMs: number }
  /** After a failure: waits `delayMs`, whatever is notified. */
  | { type: 'backoff'; delayMs: number };

/** A wait that takes time. */
export type Pause = Extract<Wait, { delayMs: number }>;

/** How one turn of the loop ended. `before`: the round that was publishing beside it. */
export type RoundResult =
  /** A full batch: it publishes while the next turn claims. */
  | { type: 'ahead'; before: RoundTally | undefined }
  /**
   * The round published and settled. `overlapped`: its claim ran while another round held
   * its leases, so its size says nothing about the backlog (an ordered claim skips the
   * events behind that round's).
   */
  | { type: 'settled'; tally: RoundTally; before: RoundTally | undefined; overlapped: boolean }
  /** A database error (cleanup, claim or settle). */
  | { type: 'failed'; error: unknown; before: RoundTally | undefined };

export interface WaitOptions {
  batchSize: number;
  pollIntervalMs: number;
  minPollIntervalMs: number;
  baseDelayMs: number;
  maxDelayMs: number;
  random: Random;
}

export interface Decision {
  state: LoopState;
  wait: Wait;
  /** What to report about the wait (an error, an outage), if anything. */
  report: RelayEvent | undefined;
}

const NOW: Wait = { type: 'none' };

export const initialLoopState = (options: Pick<WaitOptions, 'pollIntervalMs'>): LoopState => ({
  status: 'stopped',
  notified: false,
  errors: 0,
  outages: 0,
  pollWaitMs: options.pollIntervalMs,
});

/** A (re)started loop: the counts of the last run are forgotten, a notification is not. */
export const startedState = (state: LoopState, options: Pick<WaitOptions, 'pollIntervalMs'>) => ({
  ...initialLoopState(options),
  status: 'running' as const,
  notified: state.notified,
});

/**
 * The loop's decision after a turn: a database error backs off with jitter (growing with the
 * errors in a row) and so does a round the publisher was unreachable for (outages in a row);
 * a full batch, or a round that overlapped another, claims again at once; otherwise the loop
 * polls, `minPollIntervalMs` after finding events and doubling up to `pollIntervalMs` while
 * it finds none. A stop, or a notification during a poll, ends the wait (`waitIsOver`).
 * Pure but for `options.random`.
 */
export function nextWait(state: LoopState, result: RoundResult, options: WaitOptions): Decision {
  // A round that published beside this one ends an outage.
  const outages = (result.before?.round.published ?? 0) > 0 ? 0 : state.outages;
  switch (result.type) {
    case 'failed': {
      const errors = state.errors + 1;
      const retryInMs = delayFor(errors, options);
      return decided(
        { ...state, errors, outages },
        { type: 'backoff', delayMs: retryInMs },
        { type: 'error', error: result.error, retryInMs },
      );
    }
    case 'ahead':
      return decided({ ...state, errors: 0, outages }, NOW);
    case 'settled':
      return afterRound({ ...state, errors: 0, outages }, result, options);
  }
}

function afterRound(
  state: LoopState,
  { tally, overlapped }: { tally: RoundTally; overlapped: boolean },
  options: WaitOptions,
): Decision {
  const { round } = tally;
  if (isOutage(round)) {
    // The publisher is unreachable: pause the whole relay, not just these events, so an
    // outage neither burns attempts nor spins.
    const outages = state.outages + 1;
    const retryInMs = delayFor(outages, options);
    return decided(
      { ...state, outages },
      { type: 'backoff', delayMs: retryInMs },
      {
        type: 'publisher_unavailable',
        consecutive: outages,
        retryInMs,
        error: tally.unreachableError,
      },
    );
  }
  const next = round.published > 0 ? { ...state, outages: 0 } : state;
  // A partial batch is not overlapped: a relay that keeps up publishes each batch as it comes.
  if (round.claimed >= options.batchSize || overlapped) return decided(next, NOW);
  const pollWaitMs =
    round.claimed > 0
      ? options.minPollIntervalMs
      : Math.min(options.pollIntervalMs, state.pollWaitMs * 2);
  return decided({ ...next, pollWaitMs }, { type: 'poll', delayMs: pollWaitMs });
}

/**
 * After claiming `claimed` events, whether to claim the next batch while this one publishes
 * (at most one round ahead): a full batch says more may be waiting, unless the round that
 * published beside it found the publisher unreachable. Claim and settle are the relay's
 * database work, publish the broker's or the consumer's: overlapped, one relay keeps two
 * cores busy through a backlog.
 */
export const keepsAhead = (
  claimed: number,
  before: RoundTally | undefined,
  options: Pick<WaitOptions, 'batchSize'>,
) => claimed === options.batchSize && !(before && isOutage(before.round));

/** True when `wait` ends now: the relay is stopping, or a NOTIFY came during a poll. */
export const waitIsOver = (state: LoopState, wait: Wait) =>
  wait.type === 'none' || state.status !== 'running' || (wait.type === 'poll' && state.notified);

function decided(state: LoopState, wait: Wait, report?: RelayEvent): Decision {
  return { state, wait: waitIsOver(state, wait) ? NOW : wait, report };
}

const delayFor = (consecutive: number, options: WaitOptions) =>
  backoffDelay({
    attempt: Math.min(consecutive - 1, 64),
    baseDelayMs: options.baseDelayMs,
    maxDelayMs: options.maxDelayMs,
    random: options.random,
  });
