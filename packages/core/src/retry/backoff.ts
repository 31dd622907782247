import type { Random } from './Random.js';

export interface BackoffOptions {
  /** Which retry this is, counting from 0 (the first retry); a non-negative integer. */
  attempt: number;
  /** The ceiling of the first retry's delay; it doubles with every retry. */
  baseDelayMs: number;
  /** No delay is ever longer than this, however many retries came before. */
  maxDelayMs: number;
  /**
   * Returns a number in [0, 1).
   * @default Math.random
   */
  random?: Random;
}

/**
 * Exponential backoff with full jitter: a delay drawn uniformly from
 * `[0, min(maxDelayMs, baseDelayMs · 2^attempt))`.
 *
 * Full jitter (rather than a fixed exponential delay) spreads the retries of clients that
 * failed together over the whole window, so they do not come back as one wave
 * (see "Exponential Backoff And Jitter", AWS Architecture Blog, 2015).
 *
 * @throws RangeError for a negative, non-finite or (for `attempt`) non-integer input, or
 * a `random` that returns something outside [0, 1).
 */
export function backoffDelay({
  attempt,
  baseDelayMs,
  maxDelayMs,
  random = Math.random,
}: BackoffOptions): number {
  if (!Number.isInteger(attempt) || attempt < 0) {
    throw new RangeError(
      `backoffDelay: attempt must be a non-negative integer (0 for the first retry); got ${attempt}.`,
    );
  }
  requireNonNegative('baseDelayMs', baseDelayMs);
  requireNonNegative('maxDelayMs', maxDelayMs);

  // 2 ** attempt is Infinity from attempt 1024 on, and 0 · Infinity is NaN: cap first.
  const ceilingMs =
    baseDelayMs === 0 ? 0 : Math.min(maxDelayMs, baseDelayMs * 2 ** Math.min(attempt, 1100));

  const draw = random();
  if (!(draw >= 0 && draw < 1)) {
    throw new RangeError(`backoffDelay: random() must return a number in [0, 1); got ${draw}.`);
  }
  return draw * ceilingMs;
}

function requireNonNegative(name: string, value: number): void {
  if (!Number.isFinite(value) || value < 0) {
    throw new RangeError(
      `backoffDelay: ${name} must be a finite number of milliseconds, 0 or more; got ${value}.`,
    );
  }
}
