// `@idem/core`: what an app calls. Store and adapter authors import `@idem/core/store`;
// tests import `@idem/core/testing`.
export { type Clock, systemClock, type TimerHandle } from './Clock.js';
export { createIdempotency, wasReplayed } from './createIdempotency.js';
export { deriveKey } from './deriveKey.js';
export {
  defaultErrorPolicy,
  type ErrorDecision,
  type ErrorPolicy,
  type ErrorPolicyOption,
  ReplayedError,
} from './errorPolicy.js';
export * from './errors/index.js';
export type * from './Idempotency.js';
export type * from './IdempotencyOptions.js';
export type { IdempotencySettings } from './resolveSettings.js';
export { type BackoffOptions, backoffDelay } from './retry/backoff.js';
export type { Random } from './retry/Random.js';
export { RetryBudget, type RetryBudgetOptions, type RetryKind } from './retry/RetryBudget.js';
export { parseRetryAfter, retryAfterSeconds } from './retry/retryAfter.js';
export { type Serializer, taggedJsonSerializer } from './serializer.js';
export type { JsonValue, StoredError } from './store/record.js';
export { MAX_KEY_LENGTH, validateKey } from './validateKey.js';
export * from './wireFormat.js';
