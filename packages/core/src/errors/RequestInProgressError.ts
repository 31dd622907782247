import { guardFor, IdempotencyError, type IdempotencyErrorOptions } from './IdempotencyError.js';

/** Another request with the same key is still running (HTTP 409 with `Retry-After`). */
export class RequestInProgressError extends IdempotencyError {
  readonly scope: string;
  readonly key: string;
  /** How long until the current holder's lease ends; a sensible time to retry. */
  readonly retryAfterMs: number;

  constructor(scope: string, key: string, retryAfterMs: number, options?: IdempotencyErrorOptions) {
    super(
      'REQUEST_IN_PROGRESS',
      `A request with idempotency key "${key}" is still in progress. ` +
        `Retry the same request with the same key in ${Math.ceil(retryAfterMs / 1000)} s.`,
      options,
    );
    this.name = 'RequestInProgressError';
    this.scope = scope;
    this.key = key;
    this.retryAfterMs = retryAfterMs;
  }
}

export const isRequestInProgressError = guardFor<RequestInProgressError>('REQUEST_IN_PROGRESS');
