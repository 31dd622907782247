export type { StoreErrorReport } from '../adapter/KeyedOptions.js';
export {
  IDEMPOTENCY_KEY_FIELD,
  type IdempotencyKeyFieldProps,
  idempotencyKeyField,
} from './actionInput.js';
export {
  DEFAULT_ACTION_IN_PROGRESS,
  DEFAULT_MAX_ACTION_INPUT_BYTES,
  type IdempotencyRefusal,
  type IdempotentActionOptions,
  type TransactionActionOptions,
} from './IdempotentActionOptions.js';
export { idempotentAction } from './idempotentAction.js';
