export {
  InvalidKeyError,
  isInvalidKeyError,
  isRetryBudgetExhaustedError,
  RetryBudget,
  RetryBudgetExhaustedError,
  type RetryBudgetOptions,
} from '@idem/core';
export {
  type HeadersSource,
  IDEMPOTENCY_KEY_BATCH_HEADER,
  IDEMPOTENCY_KEY_HEADER,
  type IdempotencyHeaders,
  type IdempotencyHeadersInput,
  idempotencyHeaders,
} from './idempotencyHeaders.js';
export { type IdempotencyLinkOptions, idempotencyLink } from './links/idempotencyLink.js';
export {
  type AttemptFailure,
  classifyError,
  type IdempotencyStatus,
  isTransientError,
} from './links/internals/classifyError.js';
export {
  type KeyedRetryLinkOptions,
  keyedRetryLink,
  type RetryEvent,
  type RetryOnContext,
} from './links/keyedRetryLink.js';
