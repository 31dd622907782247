import type { Clock, TimerHandle } from '../Clock.js';

/** A clock that only moves when told to; its timers fire inside `advance`. */
export interface ManualClock extends Clock {
  /** Moves time forward (wall and monotonic alike), firing every timer that falls due, in order. */
  advance(ms: number): void;
  /** Moves time to an absolute epoch-ms value (never backwards). */
  set(epochMs: number): void;
  /** How many timers are waiting. */
  pendingTimers(): number;
}

interface Timer {
  id: number;
  dueAt: number;
  callback: () => void;
}

/**
 * Creates a `ManualClock` whose `now()` starts at `startMs` (default:
 * 2026-01-01T00:00:00Z) and whose `monotonicNow()` starts at 0.
 */
export function manualClock(startMs = Date.UTC(2026, 0, 1)): ManualClock {
  let elapsed = 0;
  let nextId = 1;
  const timers = new Map<number, Timer>();

  const fireDue = (target: number) => {
    for (;;) {
      let next: Timer | undefined;
      for (const timer of timers.values()) {
        if (timer.dueAt <= target && (!next || timer.dueAt < next.dueAt)) next = timer;
      }
      if (!next) break;
      timers.delete(next.id);
      elapsed = Math.max(elapsed, next.dueAt);
      next.callback();
    }
    elapsed = Math.max(elapsed, target);
  };

  return {
    now: () => startMs + elapsed,
    monotonicNow: () => elapsed,
    setTimeout(callback, delayMs): TimerHandle {
      const id = nextId++;
      timers.set(id, { id, dueAt: elapsed + Math.max(0, delayMs), callback });
      return id;
    },
    clearTimeout(handle) {
      timers.delete(handle as number);
    },
    advance(ms) {
      if (!(ms >= 0)) throw new RangeError(`advance(ms) needs a non-negative number, got ${ms}`);
      fireDue(elapsed + ms);
    },
    set(epochMs) {
      fireDue(Math.max(elapsed, epochMs - startMs));
    },
    pendingTimers: () => timers.size,
  };
}
