import { backoffDelay, type Clock, ConfigurationError } from '@idem/core';
import { notifyObserver, requirePositive } from '@idem/core/store';
import { type ClaimedEvent, claimBatch } from './claimBatch.js';
import { cleanupSent } from './cleanupSent.js';
import { listDeadLetters, redriveDeadLetters } from './deadLetters.js';
import { listenForWakeUps } from './listenForWakeUps.js';
import { outboxBacklog } from './outboxStats.js';
import { type PublishAttempt, type PublishPolicy, publishClaimed } from './publishClaimed.js';
import type { Relay, RelayRound } from './Relay.js';
import type { RelayEvent } from './RelayEvent.js';
import type { RelayOptions } from './RelayOptions.js';
import { settleBatch } from './settleBatch.js';

/** Node's own timers: unlike `systemClock`'s, they keep a relay-only process alive. */
const nodeTimers: Pick<Clock, 'setTimeout' | 'clearTimeout'> = {
  setTimeout: (callback, delayMs) => globalThis.setTimeout(callback, delayMs),
  clearTimeout: (handle) => globalThis.clearTimeout(handle as ReturnType<typeof setTimeout>),
};

const CLEANUP_BATCH = 1_000;

/**
 * A relay: publishes what `enqueue` wrote, at least once, and deletes it (or marks it sent,
 * with `retainSentMs`). Any number of
 * relays may share one outbox; they split the work with `FOR UPDATE SKIP LOCKED`.
 *
 * @example
 * const relay = createRelay({ db, publisher: inProcessPublisher({ 'order.placed': onOrderPlaced }) });
 * await relay.start();
 * // on shutdown:
 * await relay.stop();
 */
export function createRelay(options: RelayOptions): Relay {
  const { db, publisher, clock } = options;
  const batchSize = positiveInteger('batchSize', options.batchSize ?? 100);
  const pollIntervalMs = positiveNumber('pollIntervalMs', options.pollIntervalMs ?? 1_000);
  const minPollIntervalMs = positiveNumber(
    'minPollIntervalMs',
    options.minPollIntervalMs ?? pollIntervalMs,
  );
  if (minPollIntervalMs > pollIntervalMs) {
    throw new ConfigurationError(
      `createRelay: minPollIntervalMs (${minPollIntervalMs}) must not exceed pollIntervalMs (${pollIntervalMs}).`,
    );
  }
  const leaseMs = positiveNumber('leaseMs', options.leaseMs ?? 30_000);
  const maxAttempts = positiveInteger('maxAttempts', options.maxAttempts ?? 10);
  const retainSentMs = nonNegative('retainSentMs', options.retainSentMs ?? 0);
  const cleanupIntervalMs = nonNegative('cleanupIntervalMs', options.cleanupIntervalMs ?? 60_000);
  const ordered = options.ordered ?? false;
  const policy: PublishPolicy = {
    publisher,
    maxAttempts,
    baseDelayMs: nonNegative('backoff.baseDelayMs', options.backoff?.baseDelayMs ?? 1_000),
    maxDelayMs: nonNegative('backoff.maxDelayMs', options.backoff?.maxDelayMs ?? 300_000),
    random: options.backoff?.random ?? Math.random,
  };
  const timers = clock ?? nodeTimers;
  const now = () => clock?.now() ?? Date.now();

  const counters = { published: 0, failed: 0, deadLettered: 0 };
  let running = false;
  let loop: Promise<void> | undefined;
  let unlisten: (() => Promise<void>) | undefined;
  let sleeper: { finish: () => void; wakeable: boolean } | undefined;
  let notified = false;
  /** The last "unreachable" error of the latest round, for `publisher_unavailable`. */
  let unreachableError: unknown;

  // Observability must never stop the relay.
  const emit = (event: RelayEvent) => notifyObserver(options.onEvent, event);

  const delayFor = (consecutive: number) =>
    backoffDelay({
      attempt: Math.min(consecutive - 1, 64),
      baseDelayMs: policy.baseDelayMs,
      maxDelayMs: policy.maxDelayMs,
      random: policy.random,
    });

  /** Waits `delayMs`, or less: until `stop()`, or a notification when `wakeable`. */
  const sleep = (delayMs: number, wakeable: boolean) =>
    new Promise<void>((resolve) => {
      if (!running || (wakeable && notified)) {
        resolve();
        return;
      }
      const finish = () => {
        timers.clearTimeout(handle);
        if (sleeper?.finish === finish) sleeper = undefined;
        resolve();
      };
      const handle = timers.setTimeout(finish, delayMs);
      sleeper = { finish, wakeable };
    });

  const wake = () => {
    notified = true;
    if (sleeper?.wakeable) sleeper.finish();
  };

  async function runOnce(): Promise<RelayRound> {
    return finish(await claim());
  }

  async function claim(): Promise<{ token: string; claimed: ClaimedEvent[] }> {
    const token = globalThis.crypto.randomUUID();
    // Reset before claiming: a notification from here on may be for a commit this claim
    // does not see, and must still cut the next wait short.
    notified = false;
    return { token, claimed: await claimBatch(db, { batchSize, leaseMs, ordered, token, clock }) };
  }

  /** Publishes and settles a claimed batch. */
  async function finish({
    token,
    claimed,
  }: {
    token: string;
    claimed: ClaimedEvent[];
  }): Promise<RelayRound> {
    const round: RelayRound = {
      claimed: claimed.length,
      published: 0,
      retried: 0,
      deadLettered: 0,
      released: 0,
      leaseLost: 0,
    };
    if (claimed.length === 0) return round;

    const attempts = await publishClaimed(claimed, policy);
    const settled = await settleBatch(
      db,
      token,
      attempts.map((attempt) => attempt.settlement),
      { keepSent: retainSentMs > 0, clock },
    );
    report(claimed, attempts, settled, round);
    return round;
  }

  function report(
    claimed: Awaited<ReturnType<typeof claimBatch>>,
    attempts: PublishAttempt[],
    settled: Set<string>,
    round: RelayRound,
  ) {
    const lost: string[] = [];
    attempts.forEach(({ settlement, error }, index) => {
      const event = claimed[index];
      if (!event) return;
      const { id, topic, createdAt } = event.message;
      if (settlement.outcome !== 'sent') counters.failed++;
      if (!settled.has(id)) {
        lost.push(id);
        return;
      }
      switch (settlement.outcome) {
        case 'sent':
          round.published++;
          counters.published++;
          emit({
            type: 'published',
            id,
            topic,
            attempts: event.attempts,
            lagMs: Math.max(0, now() - createdAt.getTime()),
          });
          break;
        case 'retry':
          round.retried++;
          emit({
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
          counters.deadLettered++;
          emit({ type: 'dead_lettered', id, topic, attempts: event.attempts + 1, error });
          break;
        case 'release':
          round.released++;
          unreachableError = error;
          break;
      }
    });
    round.leaseLost = lost.length;
    if (lost.length > 0) emit({ type: 'lease_lost', ids: lost });
  }

  async function cleanup(): Promise<number> {
    let total = 0;
    for (;;) {
      const deleted = await cleanupSent(db, { retainSentMs, limit: CLEANUP_BATCH, clock });
      total += deleted;
      if (deleted < CLEANUP_BATCH) break;
    }
    if (total > 0) emit({ type: 'cleaned_up', deleted: total });
    return total;
  }

  async function runLoop(): Promise<void> {
    let nextCleanupAt = now();
    let outages = 0;
    /** The next idle wait: minPollIntervalMs after a round that found events, doubling. */
    let pollWaitMs = pollIntervalMs;
    let errors = 0;
    /** A full round still publishing while the loop claims the next one. */
    let ahead: Promise<RelayRound> | undefined;
    /**
     * This turn's claim ran while another round still held its leases. Its size then says
     * nothing about the backlog: an ordered claim skips the events behind that round's
     * (their aggregate's earlier events are unsent), so a partial batch is no reason to sleep.
     */
    let overlapped = false;
    /** Reports a failure of the round that was publishing beside the one that failed. */
    const reportPartner = (error: unknown) => emit({ type: 'error', error, retryInMs: 0 });
    while (running) {
      let round: RelayRound;
      try {
        if (cleanupIntervalMs > 0 && now() >= nextCleanupAt) {
          nextCleanupAt = now() + cleanupIntervalMs;
          await cleanup();
        }
        const claimed = await claim();
        const finishing = finish(claimed);
        const previous = ahead;
        overlapped = previous !== undefined;
        ahead = finishing;
        // Settled below or by the next turn; an error here is reported there.
        finishing.catch(() => undefined);
        const before = previous ? await previous : undefined;
        if (before && before.published > 0) outages = 0;
        if (claimed.claimed.length === batchSize && !(before && isOutage(before))) {
          // A full batch, so more may be waiting: claim the next one while this one
          // publishes (at most one round ahead). Claim and settle are the relay's
          // database work, publish is the broker's or the consumer's: overlapped, one
          // relay keeps two cores busy through a backlog. A partial batch is not
          // overlapped, so a relay that keeps up still publishes each batch as it comes.
          errors = 0;
          continue;
        }
        ahead = undefined;
        round = await finishing;
        errors = 0;
      } catch (error) {
        // The failed round's partner, if one is still publishing, settles on its own.
        await ahead?.catch(reportPartner);
        ahead = undefined;
        errors++;
        const retryInMs = delayFor(errors);
        emit({ type: 'error', error, retryInMs });
        await sleep(retryInMs, false);
        continue;
      }
      if (isOutage(round)) {
        // The publisher is unreachable: pause the whole relay, not just these events, so
        // an outage neither burns attempts nor spins.
        outages++;
        const retryInMs = delayFor(outages);
        emit({
          type: 'publisher_unavailable',
          consecutive: outages,
          retryInMs,
          error: unreachableError,
        });
        await sleep(retryInMs, false);
        continue;
      }
      if (round.published > 0) outages = 0;
      if (round.claimed < batchSize && !overlapped) {
        pollWaitMs =
          round.claimed > 0 ? minPollIntervalMs : Math.min(pollIntervalMs, pollWaitMs * 2);
        await sleep(pollWaitMs, true);
      }
    }
    await ahead?.catch(reportPartner);
  }

  return {
    get running() {
      return running;
    },

    async start() {
      if (running) return;
      running = true;
      if (options.listen ?? true) {
        try {
          unlisten = await listenForWakeUps(db, wake);
        } catch (error) {
          // LISTEN is an optimisation: without it the relay still polls.
          emit({ type: 'error', error, retryInMs: pollIntervalMs });
        }
      }
      if (!running) {
        // stop() came while subscribing.
        await unlisten?.();
        unlisten = undefined;
        return;
      }
      loop = runLoop();
    },

    async stop() {
      running = false;
      sleeper?.finish();
      await loop;
      loop = undefined;
      const stopListening = unlisten;
      unlisten = undefined;
      await stopListening?.();
    },

    runOnce,

    async stats() {
      return { ...(await outboxBacklog(db, clock)), ...counters };
    },

    deadLetters: (listOptions) => listDeadLetters(db, listOptions),

    async redrive(ids) {
      const redriven = await redriveDeadLetters(db, ids, clock);
      if (redriven.length > 0) wake();
      return redriven;
    },

    cleanup,
  };
}

/** The publisher was unreachable for the whole round. */
const isOutage = (round: RelayRound) => round.released > 0 && round.published === 0;

const positiveInteger = (name: string, value: number) =>
  requirePositive(`createRelay: ${name}`, value, { integer: true });

const positiveNumber = (name: string, value: number) =>
  requirePositive(`createRelay: ${name}`, value);

function nonNegative(name: string, value: number): number {
  if (!(Number.isFinite(value) && value >= 0)) {
    throw new ConfigurationError(`createRelay: ${name} must be 0 or more; got ${value}.`);
  }
  return value;
}
