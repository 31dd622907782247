import type { Clock } from '@idem/core';
import type { Pause, Wait } from './nextWait.js';

export interface Sleeper {
  /** Waits `wait.delayMs`, or less: until `cutShort` ends it. */
  sleep(wait: Pause): Promise<void>;
  /** Ends the wait in progress, if there is one and `over(itsWait)` says so. */
  cutShort(over: (wait: Wait) => boolean): void;
}

/** One wait at a time on `timers`, which the relay can end early (a NOTIFY, a stop). */
export function createSleeper(timers: Pick<Clock, 'setTimeout' | 'clearTimeout'>): Sleeper {
  let pending: { wait: Wait; finish: () => void } | undefined;
  return {
    sleep: (wait) =>
      new Promise<void>((resolve) => {
        const finish = () => {
          timers.clearTimeout(handle);
          if (pending?.finish === finish) pending = undefined;
          resolve();
        };
        const handle = timers.setTimeout(finish, wait.delayMs);
        pending = { wait, finish };
      }),
    cutShort(over) {
      if (pending && over(pending.wait)) pending.finish();
    },
  };
}
