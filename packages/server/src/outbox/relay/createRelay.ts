import { notifyObserver } from '@idem/core/store';
import { missingTablesError } from '../../postgres/missingTablesError.js';
import { listDeadLetters, redriveDeadLetters } from './deadLetters.js';
import { listenForWakeUps } from './listenForWakeUps.js';
import { initialLoopState, type LoopState, waitIsOver } from './nextWait.js';
import { outboxBacklog } from './outboxStats.js';
import type { Relay } from './Relay.js';
import type { RelayEvent } from './RelayEvent.js';
import type { RelayOptions } from './RelayOptions.js';
import { relayLifecycle } from './relayLifecycle.js';
import type { LoopHost } from './relayLoop.js';
import { relaySettings } from './relaySettings.js';
import { claimRound, cleanupAll, finishRound } from './runRound.js';
import { createSleeper } from './sleeper.js';
import { addTally, NO_TOTALS, type RelayTotals } from './tally.js';

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
  const settings = relaySettings(options);
  const { db, clock } = settings;
  const sleeper = createSleeper(settings.timers);
  let state: LoopState = initialLoopState(settings);
  let totals: RelayTotals = NO_TOTALS;
  // Observability must never stop the relay.
  const emit = (event: RelayEvent) => notifyObserver(options.onEvent, event);
  const update = (next: LoopState) => {
    state = next;
    sleeper.cutShort((wait) => waitIsOver(state, wait));
  };
  const wake = () => update({ ...state, notified: true });
  const host: LoopHost = {
    settings,
    emit,
    state: () => state,
    update,
    claim() {
      // Reset before claiming: a notification from here on may be for a commit this claim
      // does not see, and must still cut the next wait short.
      update({ ...state, notified: false });
      return explained(claimRound(settings));
    },
    async finish(claim) {
      const tallied = await explained(finishRound(settings, claim));
      totals = addTally(totals, tallied);
      for (const event of tallied.events) emit(event);
      return tallied;
    },
    async cleanup() {
      const deleted = await explained(cleanupAll(settings));
      if (deleted > 0) emit({ type: 'cleaned_up', deleted });
      return deleted;
    },
    sleep: async (wait) => {
      if (!waitIsOver(state, wait)) await sleeper.sleep(wait);
    },
  };
  const subscribe = async () => {
    try {
      return await listenForWakeUps(db, wake);
    } catch (error) {
      // LISTEN is an optimisation: without it the relay still polls.
      emit({ type: 'error', error, retryInMs: settings.pollIntervalMs });
      return undefined;
    }
  };

  const lifecycle = relayLifecycle(host, subscribe);

  return {
    get running() {
      return lifecycle.running;
    },
    start: () => lifecycle.start(),
    stop: () => lifecycle.stop(),
    runOnce: async () => (await host.finish(await host.claim())).round,
    stats: async () => ({ ...(await outboxBacklog(db, clock)), ...totals }),
    deadLetters: (listOptions) => listDeadLetters(db, listOptions),
    async redrive(ids) {
      const redriven = await redriveDeadLetters(db, ids, clock);
      if (redriven.length > 0) wake();
      return redriven;
    },
    cleanup: () => host.cleanup(),
  };
}

/**
 * A round's database work, whose failure on a database without idem's tables is a
 * `ConfigurationError` naming `migrate(db)` (in `runOnce()`'s rejection and the loop's
 * `error` events), not the driver's bare "relation does not exist".
 */
async function explained<T>(work: Promise<T>): Promise<T> {
  try {
    return await work;
  } catch (error) {
    throw missingTablesError(error, 'The relay did nothing', true) ?? error;
  }
}
