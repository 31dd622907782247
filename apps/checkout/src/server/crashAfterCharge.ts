import type { IdempotencyStore, LeaseToken } from '@idem/core/store';

/**
 * The "crash after charge" chaos switch, server side. A real crash kills the process: the
 * attempt never completes, releases or renews its lease, and the client's connection
 * dies. This reproduces exactly that for one request while the server keeps running, so
 * the demo can show the client's retry meeting 409 while the dead attempt's lease runs
 * out, then taking over and finding the charge in its recovery point.
 */
export interface CrashSwitch {
  /** Settles when the request "crashed": the route handler then drops the connection. */
  readonly crashed: Promise<void>;
  /** Kills this attempt: every later store call of it hangs, and this never returns. */
  crash(attempt: Pick<LeaseToken, 'scope' | 'key' | 'version'>): Promise<never>;
}

/**
 * Attempts that "died", by scope, key and fencing version. On globalThis because Next.js
 * may load this module once per bundle (instrumentation, route handlers).
 */
const shared = globalThis as { __idemCheckoutDeadAttempts?: Set<string> };
shared.__idemCheckoutDeadAttempts ??= new Set();
const deadAttempts = shared.__idemCheckoutDeadAttempts;

const attemptId = (token: Pick<LeaseToken, 'scope' | 'key' | 'version'>) =>
  `${token.version}\u0000${token.scope}\u0000${token.key}`;

/** A promise that never settles: what a dead process's pending I/O amounts to. */
const never = () => new Promise<never>(() => {});

export function crashSwitch(): CrashSwitch {
  let fire!: () => void;
  const crashed = new Promise<void>((resolve) => {
    fire = resolve;
  });
  return {
    crashed,
    crash(attempt) {
      deadAttempts.add(attemptId(attempt));
      fire();
      return never();
    },
  };
}

/**
 * The store as a dead attempt sees it: completion, release, heartbeat and recovery points
 * of a crashed attempt never reach the database (so its lease simply runs out); everyone
 * else's calls pass through.
 */
export function crashableStore(store: IdempotencyStore): IdempotencyStore {
  const dead = (token: LeaseToken) => deadAttempts.has(attemptId(token));
  return {
    claim: (request) => store.claim(request),
    complete: (token, outcome, ttlMs) =>
      dead(token) ? never() : store.complete(token, outcome, ttlMs),
    release: (token) => (dead(token) ? never() : store.release(token)),
    heartbeat: (token, leaseMs) => (dead(token) ? never() : store.heartbeat(token, leaseMs)),
    saveStep: (token, name, value) => (dead(token) ? never() : store.saveStep(token, name, value)),
    get: (scope, key) => store.get(scope, key),
    sweep: (options) => store.sweep(options),
  };
}
