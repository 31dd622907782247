import { IdempotencyError } from '@idem/core';
import { guardFor } from '@idem/core/store';
import { STORE_FAILED_MESSAGE } from './storeFailedMessage.js';

/**
 * The idempotency store failed under a request (it could not be reached, or refused a
 * statement): a member of `@idem/core`'s error family (code `STORE_FAILED`) whose `cause` is
 * the store's own error. Its message is the answer's, which holds no SQL; the driver's words
 * stay in the cause, for the server's logs.
 */
export class StoreFailedError extends IdempotencyError {
  constructor(cause: unknown) {
    super('STORE_FAILED', STORE_FAILED_MESSAGE, { cause });
    this.name = 'StoreFailedError';
  }
}

/** Recognises a `StoreFailedError` by brand and code, even from another copy of idem. */
export const isStoreFailedError = guardFor<StoreFailedError>('STORE_FAILED');
