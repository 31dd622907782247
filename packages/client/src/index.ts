export {
  type IdempotencyStatus,
  InvalidKeyError,
  isInvalidKeyError,
  isRetryBudgetExhaustedError,
  RetryBudget,
  RetryBudgetExhaustedError,
  type RetryBudgetOptions,
} from '@idem/core';
export { type AttemptFailure, classifyError } from './classifyError.js';
export {
  type HeadersSource,
  IDEMPOTENCY_KEY_BATCH_HEADER,
  IDEMPOTENCY_KEY_HEADER,
  type IdempotencyHeaders,
  type IdempotencyHeadersInput,
  idempotencyHeaders,
} from './idempotencyHeaders.js';
export {
  INTENT_KEY_PREFIX,
  type IntentKey,
  type IntentKeyOptions,
  type IntentStorage,
  intentKey,
} from './intentKey.js';
export { isOutcomeUnknown } from './isOutcomeUnknown.js';
export { isTransientError } from './isTransientError.js';
export { type IdempotencyLinkOptions, idempotencyLink } from './links/idempotencyLink.js';
export {
  KEYED_RETRY_BUDGET,
  type KeyedRetryLinkOptions,
  keyedRetryLink,
  type RetryEvent,
  type RetryOnContext,
} from './links/keyedRetryLink.js';
export {
  type RetryingIdempotencyLinkOptions,
  retryingIdempotencyLink,
} from './links/retryingIdempotencyLink.js';
