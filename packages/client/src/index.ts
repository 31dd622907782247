export {
  type HeadersSource,
  type IdempotencyHeaders,
  type IdempotencyHeadersInput,
  idempotencyHeaders,
} from './idempotencyHeaders.js';
export {
  type IntentKey,
  type IntentKeyOptions,
  type IntentStorage,
  intentKey,
} from './intentKey.js';
export { isOutcomeUnknown } from './isOutcomeUnknown.js';
export { type IdempotencyLinkOptions, idempotencyLink } from './links/idempotencyLink.js';
export {
  KEYED_RETRY_BUDGET,
  type KeyedRetryLinkOptions,
  type RetryEvent,
  type RetryOnContext,
} from './links/KeyedRetryLinkOptions.js';
export { keyedRetryLink } from './links/keyedRetryLink.js';
export {
  type RetryingIdempotencyLinkOptions,
  retryingIdempotencyLink,
} from './links/retryingIdempotencyLink.js';
