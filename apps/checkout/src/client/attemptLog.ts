/**
 * What the browser saw of each checkout: every HTTP attempt of its key, in order. Kept
 * outside React (one log per tab) so it survives navigation to the confirmation page.
 */

export type AttemptOutcome =
  | { kind: 'pending' }
  /** The server ran the checkout for this request. */
  | { kind: 'executed' }
  /** The server answered from the key's stored outcome (`Idempotent-Replayed: true`). */
  | { kind: 'replayed' }
  /** Another attempt holds the key: 409 with Retry-After. */
  | { kind: 'in-progress'; retryAfterMs: number | null }
  /** The server answered, the answer never arrived (dropped by the chaos network). */
  | { kind: 'reply-lost'; serverSaid: 'executed' | 'replayed' | 'in-progress' | 'error' }
  /** Never left the browser (chaos: fail before sending). */
  | { kind: 'not-sent' }
  /** The connection died with the server ("crash after charge"). */
  | { kind: 'connection-lost' }
  /** An error answer, e.g. the card was declined (402). */
  | { kind: 'error'; status: number; message: string; replayed: boolean };

export interface Attempt {
  /** 1, 2, … per key, in the order they were sent. */
  number: number;
  /** Milliseconds after the checkout started. */
  sentAtMs: number;
  outcome: AttemptOutcome;
  /** Set when the retry link decided to try again. */
  retryInMs?: number;
}

export interface CheckoutRun {
  key: string;
  startedAt: number;
  /** The chaos switches that were on, in words ("drop 30 % of replies", …). */
  chaos: readonly string[];
  attempts: readonly Attempt[];
}

type Listener = () => void;

const runs = new Map<string, CheckoutRun>();
let latestKey: string | null = null;
let version = 0;
const listeners = new Set<Listener>();

function emit() {
  version++;
  for (const listener of listeners) listener();
}

function update(key: string, change: (run: CheckoutRun) => CheckoutRun) {
  const run = runs.get(key);
  if (!run) return;
  runs.set(key, change(run));
  emit();
}

export const attemptLog = {
  subscribe(listener: Listener): () => void {
    listeners.add(listener);
    return () => listeners.delete(listener);
  },
  version: () => version,
  run: (key: string | null): CheckoutRun | undefined => (key ? runs.get(key) : undefined),
  latestKey: () => latestKey,

  /** A submit of `key` (a second submit of the same key continues its run). */
  start(key: string, chaos: readonly string[] = []) {
    latestKey = key;
    if (!runs.has(key)) {
      runs.set(key, { key, startedAt: performance.now(), chaos, attempts: [] });
    }
    emit();
  },

  /** A request with `key` is being sent; returns its attempt number. */
  send(key: string): number {
    if (!runs.has(key)) this.start(key);
    const run = runs.get(key)!;
    const number = run.attempts.length + 1;
    update(key, (current) => ({
      ...current,
      attempts: [
        ...current.attempts,
        {
          number,
          sentAtMs: Math.round(performance.now() - current.startedAt),
          outcome: { kind: 'pending' },
        },
      ],
    }));
    return number;
  },

  finish(key: string, number: number, outcome: AttemptOutcome) {
    update(key, (run) => ({
      ...run,
      attempts: run.attempts.map((attempt) =>
        attempt.number === number ? { ...attempt, outcome } : attempt,
      ),
    }));
  },

  /** The retry link will send `key` again in `delayMs`: noted on its latest finished attempt. */
  retrying(key: string, delayMs: number) {
    update(key, (run) => {
      const index = run.attempts.findLastIndex((attempt) => attempt.outcome.kind !== 'pending');
      if (index < 0) return run;
      const attempts = [...run.attempts];
      attempts[index] = { ...attempts[index]!, retryInMs: Math.round(delayMs) };
      return { ...run, attempts };
    });
  },
};
