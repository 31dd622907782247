/**
 * `pulling` while the subscription delivers; `pulled` once it ended (closed or failed);
 * `stopping` from `stop()` on, whatever the subscription does.
 */
export type FlowStatus = 'pulling' | 'pulled' | 'stopping';

/** The flow's one state, beside the messages it holds. */
export interface FlowState {
  status: FlowStatus;
  /**
   * A batch smaller than `maxBatch` is being handled. While it is, another partial batch
   * does not start: the messages that arrive meanwhile wait for it (or for a full batch) and
   * go together in the next transaction, as a database's group commit does. Without this,
   * under a steady flow every idle worker took the one or two messages that had just
   * arrived, and most transactions were tiny. A lone message still starts at once.
   */
  partialInFlight: boolean;
}

/** There is a batch a worker may start now, with `queued` messages waiting. */
export const batchReady = (state: FlowState, queued: number, maxBatch: number) =>
  queued >= maxBatch || (queued > 0 && (!state.partialInFlight || state.status === 'pulled'));

/**
 * What an idle worker does: `take` a batch, `wait` for messages (or for the partial batch in
 * flight to end), or `exit` (stopping, or the subscription ended and nothing is left). Pure.
 */
export function workerStep(
  state: FlowState,
  queued: number,
  maxBatch: number,
): 'take' | 'wait' | 'exit' {
  if (state.status === 'stopping') return 'exit';
  if (batchReady(state, queued, maxBatch)) return 'take';
  return state.status === 'pulled' && queued === 0 ? 'exit' : 'wait';
}

export interface Flow<TMessage> {
  /**
   * Queues a pulled message. With `maxMessages` queued, returns a promise that resolves once
   * a worker made room (or at `stop()`).
   */
  push(message: TMessage): Promise<void> | undefined;
  /** The subscription ended. */
  pulled(): void;
  /** Stops handing out batches; the workers exit once their batch is done. */
  stop(): void;
  /** The next batch for a worker, or `undefined` when it should exit. */
  take(): Promise<TMessage[] | undefined>;
  /** A worker finished `batch`. */
  finished(batch: readonly TMessage[]): void;
  /** Takes every message still queued (pulled but never started). */
  drain(): TMessage[];
  state(): FlowState;
}

/** The queue between the subscription and the workers, and who waits on whom. */
export function createFlow<TMessage>(limits: {
  maxBatch: number;
  maxMessages: number;
}): Flow<TMessage> {
  const { maxBatch, maxMessages } = limits;
  const queue: TMessage[] = [];
  const waitingWorkers: (() => void)[] = [];
  let state: FlowState = { status: 'pulling', partialInFlight: false };
  let wakePuller: (() => void) | undefined;
  const signalWorkers = () => {
    for (const wake of waitingWorkers.splice(0)) wake();
  };
  const releasePuller = () => {
    wakePuller?.();
    wakePuller = undefined;
  };
  return {
    push(message) {
      queue.push(message);
      if (batchReady(state, queue.length, maxBatch)) signalWorkers();
      if (queue.length < maxMessages) return undefined;
      return new Promise<void>((resolve) => {
        wakePuller = resolve;
      });
    },
    pulled() {
      if (state.status === 'pulling') state = { ...state, status: 'pulled' };
      signalWorkers();
    },
    stop() {
      state = { ...state, status: 'stopping' };
      signalWorkers();
      releasePuller();
    },
    async take() {
      for (;;) {
        const step = workerStep(state, queue.length, maxBatch);
        if (step === 'exit') return undefined;
        if (step === 'take') break;
        await new Promise<void>((resolve) => {
          waitingWorkers.push(resolve);
        });
      }
      const batch = queue.splice(0, maxBatch);
      if (batch.length < maxBatch) state = { ...state, partialInFlight: true };
      releasePuller();
      return batch;
    },
    finished(batch) {
      if (batch.length >= maxBatch) return;
      state = { ...state, partialInFlight: false };
      if (batchReady(state, queue.length, maxBatch)) signalWorkers();
    },
    drain: () => queue.splice(0),
    state: () => state,
  };
}
