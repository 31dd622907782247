import { ConfigurationError } from '../errors/ConfigurationError.js';

export interface RetryBudgetOptions {
  /**
   * Tokens the bucket holds, and starts with.
   * @default 500
   */
  capacity?: number;
  /**
   * Tokens a retry after an error costs.
   * @default 5
   */
  retryCost?: number;
  /**
   * Tokens a retry after a timeout costs: more than an error, because a timed-out call
   * may still be loading the server.
   * @default 10
   */
  timeoutCost?: number;
  /**
   * Tokens returned by a call that succeeded without a retry.
   * @default 1
   */
  successRefund?: number;
}

/** What a retry follows: an error response / network failure, or a timeout. */
export type RetryKind = 'retry' | 'timeout';

/**
 * A retry budget shared by every call of a client: a token bucket in the spirit of the
 * AWS SDKs' "standard" retry mode.
 *
 * Every retry must first take tokens (`tryAcquire`); successes put tokens back
 * (`recordSuccess`). While the server is healthy, the occasional retry is paid for many
 * times over. When it is failing, each failed call spends tokens and almost nothing
 * refills them, so after `capacity / retryCost` retries (100 with the defaults) the
 * bucket is empty and calls fail fast on their first error instead of retrying. That is
 * what stops a retry storm: without a budget, `maxAttempts` retries per call multiply the
 * load on a server that is already struggling (3 attempts = 3× the traffic); with one,
 * sustained retries are bounded by about one per `retryCost / successRefund` successes,
 * and the bucket refills as the server recovers.
 *
 * @example
 * ```ts
 * const budget = new RetryBudget();
 * if (budget.tryAcquire('retry')) {
 *   // ... retry; on success: budget.recordSuccess(budget.retryCost)
 * } else {
 *   throw new RetryBudgetExhaustedError({ cause: error });
 * }
 * ```
 */
export class RetryBudget {
  readonly capacity: number;
  readonly retryCost: number;
  readonly timeoutCost: number;
  readonly successRefund: number;
  #available: number;

  constructor(options: RetryBudgetOptions = {}) {
    this.capacity = tokens('capacity', options.capacity ?? 500);
    this.retryCost = tokens('retryCost', options.retryCost ?? 5);
    this.timeoutCost = tokens('timeoutCost', options.timeoutCost ?? 10);
    this.successRefund = tokens('successRefund', options.successRefund ?? 1);
    for (const [name, cost] of [
      ['retryCost', this.retryCost],
      ['timeoutCost', this.timeoutCost],
    ] as const) {
      if (cost > this.capacity) {
        throw new ConfigurationError(
          `RetryBudget: ${name} (${cost}) is larger than capacity (${this.capacity}), so no ` +
            `retry could ever be paid for. Raise capacity or lower ${name}.`,
        );
      }
    }
    this.#available = this.capacity;
  }

  /** Tokens left in the bucket. */
  get available(): number {
    return this.#available;
  }

  /** What a retry of this kind costs. */
  costOf(kind: RetryKind): number {
    return kind === 'timeout' ? this.timeoutCost : this.retryCost;
  }

  /**
   * Takes the cost of one retry if the bucket holds it and returns `true`; otherwise
   * takes nothing and returns `false` (do not retry).
   */
  tryAcquire(kind: RetryKind): boolean {
    const cost = this.costOf(kind);
    if (cost > this.#available) return false;
    this.#available -= cost;
    return true;
  }

  /**
   * Records a successful call. Pass the cost taken by `tryAcquire` when the success came
   * from a retry, so the retry is refunded in full; without it, `successRefund` is added.
   * The bucket never grows past `capacity`.
   */
  recordSuccess(acquiredCost?: number): void {
    const refund =
      acquiredCost === undefined ? this.successRefund : tokens('acquiredCost', acquiredCost);
    this.#available = Math.min(this.capacity, this.#available + refund);
  }
}

function tokens(name: string, value: number): number {
  if (!Number.isFinite(value) || value < 0) {
    throw new RangeError(`RetryBudget: ${name} must be a finite number, 0 or more; got ${value}.`);
  }
  return value;
}
