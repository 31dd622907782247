import { describe, expect, it } from 'vitest';
import { isLeaseLostError } from './errors/LeaseLostError.js';
import { LeaseKeeper } from './lease.js';
import type { IdempotencyStore } from './store/IdempotencyStore.js';
import type { LeaseToken } from './store/record.js';
import { manualClock } from './testing/manualClock.js';

const token = (key: string): LeaseToken => ({ scope: 's', key, version: 1, createdAt: 0 });

/** A store whose heartbeats are logged as `key@time` and answered by `answer`. */
function heartbeatLog(clock: { monotonicNow(): number }, answer = () => Promise.resolve()) {
  const beats: string[] = [];
  const store = {
    heartbeat(leased: LeaseToken) {
      beats.push(`${leased.key}@${clock.monotonicNow()}`);
      return answer();
    },
  } as unknown as IdempotencyStore;
  return { beats, store };
}

const settle = async () => {
  for (let index = 0; index < 5; index++) await Promise.resolve();
};

describe('LeaseKeeper', () => {
  it('renews each lease heartbeatMs after it started and then every heartbeatMs, until stopped', async () => {
    const clock = manualClock();
    const { beats, store } = heartbeatLog(clock);
    const keeper = new LeaseKeeper({ store, leaseMs: 300, heartbeatMs: 100, clock });
    const a = keeper.start(token('a'), 0);
    clock.advance(50);
    const b = keeper.start(token('b'), 50);
    for (let step = 0; step < 5; step++) {
      clock.advance(40);
      await settle();
    }
    a.stop();
    for (let step = 0; step < 5; step++) {
      clock.advance(40);
      await settle();
    }
    b.stop();
    clock.advance(1_000);
    expect(beats).toEqual(['a@100', 'b@150', 'a@200', 'b@250', 'b@350', 'b@450']);
  });

  it('renews a lease started after every other one stopped on its own schedule', async () => {
    const clock = manualClock();
    const { beats, store } = heartbeatLog(clock);
    const keeper = new LeaseKeeper({ store, leaseMs: 300, heartbeatMs: 100, clock });
    keeper.start(token('first'), 0).stop();
    clock.advance(70);
    const late = keeper.start(token('late'), 70);
    clock.advance(30);
    await settle();
    expect(beats).toEqual([]);
    clock.advance(70);
    await settle();
    clock.advance(100);
    await settle();
    late.stop();
    expect(beats).toEqual(['late@170', 'late@270']);
  });

  it('loses a lease whose renewals keep failing once it may have run out, and stops renewing it', async () => {
    const clock = manualClock();
    const { beats, store } = heartbeatLog(clock, () => Promise.reject(new Error('ECONNREFUSED')));
    const keeper = new LeaseKeeper({ store, leaseMs: 250, heartbeatMs: 100, clock });
    const lease = keeper.start(token('cut-off'), 0);
    const other = keeper.start(token('other'), 0);
    for (let step = 0; step < 10; step++) {
      clock.advance(50);
      await settle();
    }
    expect(lease.signal.aborted).toBe(true);
    expect(isLeaseLostError(lease.signal.reason)).toBe(true);
    expect(() => lease.assertHeld()).toThrow(lease.signal.reason);
    expect(beats.filter((beat) => beat.startsWith('cut-off@'))).toEqual([
      'cut-off@100',
      'cut-off@200',
    ]);
    other.stop();
  });
});
