import type { IdempotencySettings, TimerHandle } from '@idem/core';

/** What a wait for admission came to when `lockWaitMs` ran out first. */
export const TIMED_OUT = Symbol('timed out');

/**
 * The bound on how long a call waits to get in (a connection, then the key's lock): `race`
 * gives a step's value, or `TIMED_OUT` once `lockWaitMs` passed without the call entering.
 * A call that timed out is abandoned: when its transaction starts after all, `enter()`
 * refuses it, and it ends without running anything.
 */
export type Admission = ReturnType<typeof admit>;

export function admit(clock: IdempotencySettings['clock'], lockWaitMs: number) {
  let status: 'waiting' | 'entered' | 'abandoned' = 'waiting';
  let timer: TimerHandle | undefined;
  const timedOut = new Promise<typeof TIMED_OUT>((resolve) => {
    timer = clock.setTimeout(() => {
      if (status !== 'waiting') return;
      status = 'abandoned';
      resolve(TIMED_OUT);
    }, lockWaitMs);
  });
  return {
    race<V>(step: Promise<V>): Promise<V | typeof TIMED_OUT> {
      step.catch(() => undefined);
      return Promise.race([step, timedOut]);
    },
    /** Enters, if the wait has not been abandoned: false once the call answered 409. */
    enter(): boolean {
      if (status === 'abandoned') return false;
      status = 'entered';
      clock.clearTimeout(timer);
      return true;
    },
    /** The call is over: its timer goes (a call abandoned stays abandoned). */
    close(): void {
      clock.clearTimeout(timer);
    },
  };
}
