/** An opaque timer handle returned by `Clock.setTimeout`. */
export type TimerHandle = unknown;

/**
 * Injectable time. The engine reads `now()` for durations and events and schedules
 * heartbeats and in-progress polling with `setTimeout`, so tests drive time with a
 * `manualClock` and never sleep.
 */
export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
  setTimeout(callback: () => void, delayMs: number): TimerHandle;
  clearTimeout(handle: TimerHandle): void;
}

/** The real clock: `Date.now()` and the global timers. */
export const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout: (callback, delayMs) => {
    const handle = globalThis.setTimeout(callback, delayMs);
    // A pending heartbeat must never keep a Node process alive on its own.
    (handle as { unref?: () => void }).unref?.();
    return handle;
  },
  clearTimeout: (handle) => globalThis.clearTimeout(handle as ReturnType<typeof setTimeout>),
};
