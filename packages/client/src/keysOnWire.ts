import { isDevelopment } from './isDevelopment.js';

/**
 * The keys `idempotencyHeaders` put on a request lately, newest last, in development only:
 * the keyed links read it to warn when a mutation went over HTTP without its key (the
 * terminating link was not given `headers: idempotencyHeaders`). Bounded, so an app that
 * sends many keys keeps only the latest.
 */
const keysSent = new Set<string>();

/** How many keys `keysSent` keeps: far more than the calls in flight at once. */
const MAX_KEYS_REMEMBERED = 10_000;

/** Notes that `key` was written into a request's headers (development only). */
export function noteKeySent(key: string): void {
  if (!isDevelopment()) return;
  keysSent.delete(key);
  keysSent.add(key);
  if (keysSent.size > MAX_KEYS_REMEMBERED) {
    for (const oldest of keysSent) {
      keysSent.delete(oldest);
      break;
    }
  }
}

/** Whether `idempotencyHeaders` wrote `key` into a request's headers lately. */
export function wasKeySent(key: string): boolean {
  return keysSent.has(key);
}
