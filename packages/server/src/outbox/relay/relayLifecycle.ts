import { startedState } from './nextWait.js';
import { type LoopHost, runLoop } from './relayLoop.js';

type Unlisten = () => Promise<void>;

/** `start()`, `stop()` and `running` of a relay whose loop runs on `host`. */
export interface RelayLifecycle {
  readonly running: boolean;
  start(): Promise<void>;
  stop(): Promise<void>;
}

/** What a started relay holds on to until it has stopped. */
interface Handles {
  loop?: Promise<void>;
  unlisten?: Unlisten;
  /** While stopping: settles once stopped. */
  stopped?: Promise<void>;
}

/**
 * Moves the relay's status through `starting`, `running`, `stopping` and `stopped`:
 * subscribes to wake-ups (`subscribe`, which reports its own failure), runs the loop, and
 * at `stop()` waits for the loop's rounds to settle before unsubscribing. A `start()` while
 * stopping waits for the stop.
 */
export function relayLifecycle(
  host: LoopHost,
  subscribe: () => Promise<Unlisten | undefined>,
): RelayLifecycle {
  let handles: Handles = {};
  const status = () => host.state().status;
  return {
    get running() {
      return status() === 'starting' || status() === 'running';
    },
    async start() {
      // The stop's own caller hears how it ended.
      if (status() === 'stopping') await handles.stopped?.catch(() => undefined);
      if (status() !== 'stopped') return;
      host.update({ ...host.state(), status: 'starting' });
      const unlisten = host.settings.listen ? await subscribe() : undefined;
      if (status() !== 'starting') {
        await unlisten?.(); // stop() came while subscribing
        return;
      }
      host.update(startedState(host.state(), host.settings));
      handles = { ...(unlisten && { unlisten }), loop: runLoop(host) };
    },
    stop() {
      if (status() === 'stopped') return Promise.resolve();
      if (status() === 'stopping') return handles.stopped ?? Promise.resolve();
      host.update({ ...host.state(), status: 'stopping' });
      const { loop, unlisten } = handles;
      const stopped = (async () => {
        try {
          await loop;
          await unlisten?.();
        } finally {
          // Stopped even if unsubscribing failed (stop() rejects with it): it can start again.
          handles = {};
          host.update({ ...host.state(), status: 'stopped' });
        }
      })();
      handles = { stopped };
      return stopped;
    },
  };
}
