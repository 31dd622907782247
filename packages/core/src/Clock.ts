/** An opaque timer handle returned by `Clock.setTimeout`. */
export type TimerHandle = unknown;

/**
 * Injectable time. The engine schedules heartbeats and in-progress polling with
 * `setTimeout` and measures everything it judges by itself (the lease it has left, when to
 * renew, how long to wait, durations) with `monotonicNow()`, so tests drive time with a
 * `manualClock` and never sleep.
 */
export interface Clock {
  /** Wall-clock time, milliseconds since the Unix epoch. It may jump, even backwards (NTP). */
  now(): number;
  /**
   * Milliseconds from an arbitrary origin on a clock that never jumps and never goes back.
   * A holder judges its own lease with it: the wall clock stepping back an hour must not
   * keep a holder that lost its key believing it still holds it.
   */
  monotonicNow(): number;
  /**
   * Calls `callback` once `delayMs` have passed on the monotonic clock. The engine keeps
   * one heartbeat timer, which may stay pending for up to `heartbeatMs` after the last call
   * ended: a clock for a real process should not let it keep the process alive
   * (`systemClock` unrefs its timers).
   */
  setTimeout(callback: () => void, delayMs: number): TimerHandle;
  clearTimeout(handle: TimerHandle): void;
}

/** The real clock: `Date.now()`, `performance.now()` and the global timers. */
export const systemClock: Clock = {
  now: () => Date.now(),
  monotonicNow: () => performance.now(),
  setTimeout: (callback, delayMs) => {
    const handle = globalThis.setTimeout(callback, delayMs);
    // A pending heartbeat must never keep a Node process alive on its own.
    (handle as { unref?: () => void }).unref?.();
    return handle;
  },
  clearTimeout: (handle) => globalThis.clearTimeout(handle as ReturnType<typeof setTimeout>),
};
