/**
 * What the browser saw of each checkout: every HTTP attempt of its key, in order, grouped
 * by the call (one Pay press, or each of a double click's two) that sent it. Kept outside
 * React, and in this tab's sessionStorage, so it survives navigation and reloads.
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
  /** The page was reloaded or left while this attempt was out: its answer went nowhere. */
  | { kind: 'page-left' }
  /** An error answer, e.g. the card was declined (402). */
  | { kind: 'error'; status: number; message: string; replayed: boolean };

export interface Attempt {
  /** 1, 2, … per key, in the order they were sent. */
  number: number;
  /** Which call sent it: 1 for the first Pay press, 2 for a double click's second… */
  call: number;
  /** Milliseconds after the checkout started that the request left the browser (null: not yet). */
  sentAtMs: number | null;
  outcome: AttemptOutcome;
  /** Set when the retry link decided to try again. */
  retryInMs?: number;
}

export interface CheckoutRun {
  key: string;
  /** Epoch ms: a reload keeps the time base. */
  startedAt: number;
  /** The chaos switches that were on, in words ("drop 30 % of replies", …). */
  chaos: readonly string[];
  /** How many calls were made with this key. */
  calls: number;
  attempts: readonly Attempt[];
}

type Listener = () => void;

const STORAGE_KEY = 'idem-demo-attempts';
let runs: Map<string, CheckoutRun> | undefined;
let version = 0;
const listeners = new Set<Listener>();

/** The runs of this tab, read from sessionStorage once (in the browser only). */
function all(): Map<string, CheckoutRun> {
  if (runs) return runs;
  runs = new Map();
  try {
    const saved = JSON.parse(sessionStorage.getItem(STORAGE_KEY) ?? '[]') as CheckoutRun[];
    for (const run of saved) {
      // Their requests died with the previous page: no answer will ever reach them.
      let attempts = run.attempts;
      for (let call = 1; call <= run.calls; call++) attempts = endCall(attempts, call, 'page-left');
      runs.set(run.key, { ...run, attempts });
    }
  } catch {
    // Nothing saved, or from an older demo: start empty.
  }
  return runs;
}

/**
 * A call that will send nothing more (its page is gone): its pending attempts get
 * `outcome`, and a retry its last attempt announced will not come.
 */
function endCall(
  attempts: readonly Attempt[],
  call: number,
  outcome: 'page-left',
): readonly Attempt[] {
  const last = attempts.findLastIndex((attempt) => attempt.call === call);
  return attempts.map((attempt, index) => {
    if (attempt.call !== call) return attempt;
    const ended =
      attempt.outcome.kind === 'pending' ? { ...attempt, outcome: { kind: outcome } } : attempt;
    if (index !== last) return ended;
    const { retryInMs: _dropped, ...rest } = ended;
    return rest;
  });
}

function emit() {
  version++;
  try {
    sessionStorage.setItem(STORAGE_KEY, JSON.stringify([...all().values()].slice(-20)));
  } catch {
    // Storage full or blocked: the log still holds for this page.
  }
  for (const listener of listeners) listener();
}

function update(key: string, change: (run: CheckoutRun) => CheckoutRun) {
  const run = all().get(key);
  if (!run) return;
  all().set(key, change(run));
  emit();
}

function updateAttempt(key: string, number: number, change: (attempt: Attempt) => Attempt) {
  update(key, (run) => ({
    ...run,
    attempts: run.attempts.map((attempt) =>
      attempt.number === number ? change(attempt) : attempt,
    ),
  }));
}

const elapsed = (run: CheckoutRun) => Math.max(0, Date.now() - run.startedAt);

export const attemptLog = {
  subscribe(listener: Listener): () => void {
    listeners.add(listener);
    return () => listeners.delete(listener);
  },
  version: () => version,
  run: (key: string | null): CheckoutRun | undefined => (key ? all().get(key) : undefined),

  /** A Pay press for `key`: returns its call number (a later press continues the run). */
  startCall(key: string, chaos: readonly string[]): number {
    const run = all().get(key) ?? { key, startedAt: Date.now(), chaos, calls: 0, attempts: [] };
    const call = run.calls + 1;
    all().set(key, { ...run, chaos: run.calls === 0 ? chaos : run.chaos, calls: call });
    emit();
    return call;
  },

  /** A request of `call` is on its way (it may wait for the added latency first). */
  send(key: string, call: number): number {
    const run = all().get(key);
    if (!run) return 0;
    const number = run.attempts.length + 1;
    update(key, (current) => ({
      ...current,
      attempts: [
        ...current.attempts,
        { number, call, sentAtMs: null, outcome: { kind: 'pending' } },
      ],
    }));
    return number;
  },

  /** The request left the browser now (after any added latency). */
  sent(key: string, number: number) {
    const run = all().get(key);
    if (run) updateAttempt(key, number, (attempt) => ({ ...attempt, sentAtMs: elapsed(run) }));
  },

  finish(key: string, number: number, outcome: AttemptOutcome) {
    updateAttempt(key, number, (attempt) => ({ ...attempt, outcome }));
  },

  /** The retry link will send `call` again in `delayMs`: noted on its latest finished attempt. */
  retrying(key: string, call: number, delayMs: number) {
    update(key, (run) => {
      const index = run.attempts.findLastIndex(
        (attempt) => attempt.call === call && attempt.outcome.kind !== 'pending',
      );
      const attempt = run.attempts[index];
      if (!attempt) return run;
      const attempts = [...run.attempts];
      attempts[index] = { ...attempt, retryInMs: Math.round(delayMs) };
      return { ...run, attempts };
    });
  },

  /**
   * Whether a request of this tab ran the payment (or may have: its reply was lost, or the
   * server died while running it). If none did, the answer it got was someone else's.
   */
  ranHere(key: string): boolean {
    return (all().get(key)?.attempts ?? []).some(
      ({ outcome }) =>
        outcome.kind === 'executed' ||
        outcome.kind === 'connection-lost' ||
        outcome.kind === 'page-left' ||
        (outcome.kind === 'reply-lost' && outcome.serverSaid === 'executed'),
    );
  },
};
