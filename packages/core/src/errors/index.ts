export { ConfigurationError, isConfigurationError } from './ConfigurationError.js';
export {
  IdempotencyError,
  type IdempotencyErrorCode,
  type IdempotencyErrorOptions,
  isIdempotencyError,
} from './IdempotencyError.js';
export { InvalidKeyError, isInvalidKeyError } from './InvalidKeyError.js';
export { isKeyMismatchError, KeyMismatchError } from './KeyMismatchError.js';
export { isLeaseLostError, LeaseLostError } from './LeaseLostError.js';
export { isRequestInProgressError, RequestInProgressError } from './RequestInProgressError.js';
export {
  isRetryBudgetExhaustedError,
  RetryBudgetExhaustedError,
} from './RetryBudgetExhaustedError.js';
export {
  isUnserializableValueError,
  UnserializableValueError,
} from './UnserializableValueError.js';
