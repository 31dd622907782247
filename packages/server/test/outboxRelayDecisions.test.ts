// The relay's pure decisions, without a database or a timer: how a round is counted
// (`tally`) and how long the loop waits after it (`nextWait`).
import { backoffDelay } from '@idem/core';
import { manualClock, seededRandom } from '@idem/core/testing';
import { describe, expect, it, vi } from 'vitest';
import type { ClaimedEvent } from '../src/outbox/relay/claimBatch.js';
import {
  initialLoopState,
  keepsAhead,
  type LoopState,
  nextWait,
  type RoundResult,
  startedState,
  type WaitOptions,
  waitIsOver,
} from '../src/outbox/relay/nextWait.js';
import type { PublishAttempt } from '../src/outbox/relay/publishClaimed.js';
import type { RelayRound } from '../src/outbox/relay/Relay.js';
import type { RelayOptions } from '../src/outbox/relay/RelayOptions.js';
import { relayLifecycle } from '../src/outbox/relay/relayLifecycle.js';
import type { LoopHost } from '../src/outbox/relay/relayLoop.js';
import { relaySettings } from '../src/outbox/relay/relaySettings.js';
import { createSleeper } from '../src/outbox/relay/sleeper.js';
import { addTally, NO_TOTALS, type RoundTally, tally } from '../src/outbox/relay/tally.js';

const claimed = (id: string, attempts = 0, createdAtMs = 1_000): ClaimedEvent => ({
  seq: Number(id.replace(/\D/g, '')) || 1,
  attempts,
  message: {
    id,
    topic: 'test.numbered',
    aggregateKey: null,
    payload: {},
    headers: {},
    createdAt: new Date(createdAtMs),
  },
});

describe('tally', () => {
  it('counts an empty claim as nothing', () => {
    expect(tally({ claimed: [], attempts: [], settled: new Set(), nowMs: 0 })).toEqual({
      round: { claimed: 0, published: 0, retried: 0, deadLettered: 0, released: 0, leaseLost: 0 },
      failed: 0,
      unreachableError: undefined,
      events: [],
    });
  });

  it('counts each outcome and reports it in order, lease losses last', () => {
    const boom = new Error('boom');
    const down = new Error('down');
    const events = [
      claimed('e1', 0, 1_000),
      claimed('e2', 2),
      claimed('e3', 4),
      claimed('e4'),
      claimed('e5'),
      claimed('e6', 1),
      claimed('e7', 0, 9_000),
    ];
    const attempts: PublishAttempt[] = [
      { settlement: { id: 'e1', seq: 1, outcome: 'sent' } },
      { settlement: { id: 'e2', outcome: 'retry', error: 'boom', delayMs: 250 }, error: boom },
      { settlement: { id: 'e3', outcome: 'dead', error: 'boom' }, error: boom },
      { settlement: { id: 'e4', outcome: 'release', error: 'down' }, error: 'first' },
      { settlement: { id: 'e5', outcome: 'release', error: 'down' }, error: down },
      { settlement: { id: 'e6', outcome: 'retry', error: 'boom', delayMs: 1 }, error: boom },
      { settlement: { id: 'e7', seq: 7, outcome: 'sent' } },
    ];
    // e6 and e7 were taken over by another relay after their lease ran out.
    const settled = new Set(['e1', 'e2', 'e3', 'e4', 'e5']);
    const counted = tally({ claimed: events, attempts, settled, nowMs: 5_000 });
    expect(counted.round).toEqual({
      claimed: 7,
      published: 1,
      retried: 1,
      deadLettered: 1,
      released: 2,
      leaseLost: 2,
    });
    // Every publish that did not succeed, settled or not.
    expect(counted.failed).toBe(5);
    expect(counted.unreachableError).toBe(down);
    expect(counted.events).toEqual([
      { type: 'published', id: 'e1', topic: 'test.numbered', attempts: 0, lagMs: 4_000 },
      {
        type: 'publish_failed',
        id: 'e2',
        topic: 'test.numbered',
        attempts: 3,
        retryInMs: 250,
        error: boom,
      },
      { type: 'dead_lettered', id: 'e3', topic: 'test.numbered', attempts: 5, error: boom },
      { type: 'lease_lost', ids: ['e6', 'e7'] },
    ]);
  });

  it('never reports a negative lag (an event stamped ahead of the relay’s clock)', () => {
    const counted = tally({
      claimed: [claimed('e1', 0, 9_000)],
      attempts: [{ settlement: { id: 'e1', seq: 1, outcome: 'sent' } }],
      settled: new Set(['e1']),
      nowMs: 5_000,
    });
    expect(counted.events).toEqual([expect.objectContaining({ type: 'published', lagMs: 0 })]);
  });

  it('adds rounds up to the relay’s totals', () => {
    const round = (published: number, deadLettered: number, failed: number): RoundTally => ({
      round: { ...emptyRound, claimed: published, published, deadLettered },
      failed,
      unreachableError: undefined,
      events: [],
    });
    expect(addTally(addTally(NO_TOTALS, round(3, 1, 2)), round(2, 0, 5))).toEqual({
      published: 5,
      failed: 7,
      deadLettered: 1,
    });
  });
});

const emptyRound: RelayRound = {
  claimed: 0,
  published: 0,
  retried: 0,
  deadLettered: 0,
  released: 0,
  leaseLost: 0,
};

/** A counted round: `claimed` events of which `published` went out and `released` came back. */
const counted = (claimed: number, published = claimed, released = 0): RoundTally => ({
  round: { ...emptyRound, claimed, published, released },
  failed: released,
  unreachableError: released > 0 ? 'unreachable' : undefined,
  events: [],
});

const settled = (tally: RoundTally, overlapped = false, before?: RoundTally): RoundResult => ({
  type: 'settled',
  tally,
  before,
  overlapped,
});

const options = (random = seededRandom(7)): WaitOptions => ({
  batchSize: 10,
  pollIntervalMs: 1_000,
  minPollIntervalMs: 10,
  baseDelayMs: 100,
  maxDelayMs: 2_000,
  random,
});

const running = (changes: Partial<LoopState> = {}): LoopState => ({
  ...startedState(initialLoopState(options()), options()),
  ...changes,
});

describe('nextWait', () => {
  it('polls after finding events, backs off to the poll interval while it finds none, and starts over', () => {
    const settings = options();
    let state = running();
    const waits: number[] = [];
    // An idle start, then one event, then nothing for a while, then another event.
    for (const found of [0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1]) {
      const decision = nextWait(state, settled(counted(found)), settings);
      expect(decision.report).toBeUndefined();
      state = decision.state;
      if (decision.wait.type !== 'poll') throw new Error(`a poll, not ${decision.wait.type}`);
      waits.push(decision.wait.delayMs);
    }
    expect(waits).toEqual([1_000, 10, 20, 40, 80, 160, 320, 640, 1_000, 1_000, 10]);
  });

  it('claims again at once after a full batch, or after a partial one that overlapped another', () => {
    const state = running({ pollWaitMs: 40 });
    for (const result of [
      settled(counted(10)),
      settled(counted(3), true),
      { type: 'ahead', before: undefined } as const,
    ]) {
      const decision = nextWait(state, result, options());
      expect(decision.wait).toEqual({ type: 'none' });
      expect(decision.state.pollWaitMs).toBe(40);
    }
  });

  it('backs off with jitter after database errors, growing with the errors in a row, and forgets them after a round', () => {
    const random = seededRandom(11);
    const replay = seededRandom(11);
    let state = running();
    for (let errors = 1; errors <= 6; errors++) {
      const error = new Error(`lost connection ${errors}`);
      const decision = nextWait(
        state,
        { type: 'failed', error, before: undefined },
        options(random),
      );
      const expected = backoffDelay({
        attempt: errors - 1,
        baseDelayMs: 100,
        maxDelayMs: 2_000,
        random: replay,
      });
      expect(decision.wait).toEqual({ type: 'backoff', delayMs: expected });
      expect(decision.report).toEqual({ type: 'error', error, retryInMs: expected });
      state = decision.state;
      expect(state.errors).toBe(errors);
    }
    expect(nextWait(state, settled(counted(1)), options()).state.errors).toBe(0);
    expect(nextWait(state, { type: 'ahead', before: undefined }, options()).state.errors).toBe(0);
  });

  it('caps the backoff’s exponent: a thousand errors in a row still wait at most maxDelayMs', () => {
    const decision = nextWait(
      running({ errors: 1_000 }),
      { type: 'failed', error: new Error('down'), before: undefined },
      options(() => 0.999),
    );
    expect(decision.wait).toEqual({ type: 'backoff', delayMs: 0.999 * 2_000 });
  });

  it('pauses for a round the publisher was unreachable for, and counts the outages in a row', () => {
    let state = running();
    const ceilings: number[] = [];
    for (let outage = 1; outage <= 3; outage++) {
      const decision = nextWait(
        state,
        settled(counted(4, 0, 4)),
        options(() => 0.5),
      );
      expect(decision.report).toEqual({
        type: 'publisher_unavailable',
        consecutive: outage,
        retryInMs: expect.any(Number),
        error: 'unreachable',
      });
      if (decision.wait.type !== 'backoff') throw new Error('an outage backs off');
      ceilings.push(decision.wait.delayMs * 2);
      state = decision.state;
    }
    expect(ceilings).toEqual([100, 200, 400]);
    // A round that publishes ends the outage; one that publishes nothing does not.
    expect(nextWait(state, settled(counted(0)), options()).state.outages).toBe(3);
    expect(nextWait(state, settled(counted(2)), options()).state.outages).toBe(0);
  });

  it('ends an outage when the round publishing beside this one published', () => {
    const state = running({ outages: 2 });
    const before = counted(10);
    for (const result of [
      { type: 'ahead', before } as const,
      { type: 'failed', error: new Error('x'), before } as const,
    ]) {
      expect(nextWait(state, result, options()).state.outages).toBe(0);
    }
    const stillDown = nextWait(state, settled(counted(1, 0, 1), true, before), options());
    expect(stillDown.report).toMatchObject({ type: 'publisher_unavailable', consecutive: 1 });
  });

  it('does not wait once stopping, and skips an idle wait after a notification (not a backoff)', () => {
    const failed: RoundResult = { type: 'failed', error: new Error('x'), before: undefined };
    const stopping = nextWait(running({ status: 'stopping' }), failed, options());
    expect(stopping.wait).toEqual({ type: 'none' });
    expect(stopping.report).toMatchObject({ type: 'error' });

    const notified = running({ notified: true });
    const idle = nextWait(notified, settled(counted(0)), options());
    expect(idle.wait).toEqual({ type: 'none' });
    expect(idle.state.pollWaitMs).toBe(1_000);
    expect(nextWait(notified, failed, options()).wait.type).toBe('backoff');
  });

  it('waitIsOver: a stop ends every wait, a notification only a poll', () => {
    const poll = { type: 'poll', delayMs: 50 } as const;
    const backoff = { type: 'backoff', delayMs: 50 } as const;
    expect(waitIsOver(running(), poll)).toBe(false);
    expect(waitIsOver(running({ notified: true }), poll)).toBe(true);
    expect(waitIsOver(running({ notified: true }), backoff)).toBe(false);
    expect(waitIsOver(running({ status: 'stopping' }), backoff)).toBe(true);
    expect(waitIsOver(running(), { type: 'none' })).toBe(true);
  });

  it('keepsAhead: a full batch claims the next one, unless the round beside it found the publisher down', () => {
    expect(keepsAhead(10, undefined, options())).toBe(true);
    expect(keepsAhead(9, undefined, options())).toBe(false);
    expect(keepsAhead(10, counted(10), options())).toBe(true);
    expect(keepsAhead(10, counted(10, 0, 10), options())).toBe(false);
  });

  it('a restart forgets the last run’s counts but keeps a pending notification', () => {
    const stopped = { ...running({ errors: 3, outages: 2, pollWaitMs: 40, notified: true }) };
    expect(startedState({ ...stopped, status: 'stopped' }, options())).toEqual({
      status: 'running',
      notified: true,
      errors: 0,
      outages: 0,
      pollWaitMs: 1_000,
    });
  });
});

describe('the relay’s sleeper', () => {
  it('waits on the timers it is given, and ends early only when told the wait is over', async () => {
    const clock = manualClock();
    const sleeper = createSleeper(clock);
    const sleeping = sleeper.sleep({ type: 'poll', delayMs: 100 });
    expect(clock.pendingTimers()).toBe(1);
    sleeper.cutShort((wait) => wait.type === 'backoff');
    expect(clock.pendingTimers()).toBe(1);
    sleeper.cutShort((wait) => wait.type === 'poll');
    expect(clock.pendingTimers()).toBe(0);
    await sleeping;
    const timed = sleeper.sleep({ type: 'backoff', delayMs: 100 });
    clock.advance(100);
    await timed;
    expect(clock.pendingTimers()).toBe(0);
  });
});

describe('the relay’s lifecycle', () => {
  /** A loop host without a database: every round claims nothing, and waits a poll. */
  const fakeHost = () => {
    const clock = manualClock();
    const sleeper = createSleeper(clock);
    const settings = relaySettings({
      db: {} as RelayOptions['db'],
      publisher: recordingNothing,
      clock,
    });
    let state = initialLoopState(settings);
    let rounds = 0;
    const host: LoopHost = {
      settings,
      state: () => state,
      update(next) {
        state = next;
        sleeper.cutShort((wait) => waitIsOver(state, wait));
      },
      claim: async () => ({ token: 't', claimed: [] }),
      async finish() {
        rounds++;
        return tally({ claimed: [], attempts: [], settled: new Set(), nowMs: 0 });
      },
      cleanup: async () => 0,
      sleep: async (wait) => {
        if (!waitIsOver(state, wait)) await sleeper.sleep(wait);
      },
      emit: () => {},
    };
    return { host, clock, rounds: () => rounds };
  };
  const recordingNothing = { publish: async () => {} };

  it('starts, sleeps between empty rounds, and stops out of a sleep', async () => {
    const { host, clock, rounds } = fakeHost();
    const lifecycle = relayLifecycle(host, async () => undefined);
    await lifecycle.start();
    expect(lifecycle.running).toBe(true);
    await vi.waitFor(() => expect(clock.pendingTimers()).toBe(1));
    expect(rounds()).toBe(1);
    await lifecycle.stop();
    expect(lifecycle.running).toBe(false);
    expect(host.state().status).toBe('stopped');
    expect(clock.pendingTimers()).toBe(0);
  });

  it('backs out of a start that a stop overtook while it subscribed', async () => {
    const { host } = fakeHost();
    let unsubscribed = 0;
    let subscribed: (unlisten: () => Promise<void>) => void = () => {};
    const lifecycle = relayLifecycle(
      host,
      () =>
        new Promise((resolve) => {
          subscribed = resolve;
        }),
    );
    const starting = lifecycle.start();
    expect(lifecycle.running).toBe(true);
    await lifecycle.stop();
    subscribed(async () => {
      unsubscribed++;
    });
    await starting;
    expect(unsubscribed).toBe(1);
    expect(host.state().status).toBe('stopped');
  });

  it('is stopped, and can start again, even when unsubscribing fails', async () => {
    const { host } = fakeHost();
    const lifecycle = relayLifecycle(host, async () => async () => {
      throw new Error('connection gone');
    });
    await lifecycle.start();
    const stopping = lifecycle.stop();
    const restarting = lifecycle.start();
    await expect(stopping).rejects.toThrow('connection gone');
    await restarting;
    expect(host.state().status).toBe('running');
    await expect(lifecycle.stop()).rejects.toThrow('connection gone');
    expect(host.state().status).toBe('stopped');
  });
});
