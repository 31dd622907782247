export {
  IDEMPOTENCY_KEY_BATCH_HEADER,
  IDEMPOTENCY_KEY_HEADER,
  IDEMPOTENCY_STATUS_BATCH_HEADER,
  IDEMPOTENCY_STATUS_HEADER,
  IDEMPOTENT_REPLAYED_BATCH_HEADER,
  IDEMPOTENT_REPLAYED_HEADER,
  type IdempotencyStatus,
  RETRY_AFTER_HEADER,
} from '@idem/core';
export { batchKeys } from './batchKeys.js';
export type {
  ContextWith,
  IdempotentBaseOptions,
  IdempotentMiddleware,
  KeyCall,
  KeyInput,
  LeaseDbOptions,
  LeaseIdempotency,
  LeaseModeOptions,
  LeaseStoreOptions,
  OptionalIf,
  TransactionIdempotency,
  TransactionModeOptions,
} from './IdempotentOptions.js';
export {
  type IdempotencyCallerContextOptions,
  type IdempotencyHttpContextOptions,
  type IdempotencyRequest,
  type IdempotencyRequestContext,
  idempotencyContext,
  type RequestHeadersLike,
  type RequestInfoLike,
  type ResponseHeadersLike,
} from './idempotencyContext.js';
export { DEFAULT_LOCK_WAIT_MS, DEFAULT_MAX_INPUT_BYTES, idempotent } from './idempotent.js';
export { type IdempotentProcedure, idempotentProcedure } from './idempotentProcedure.js';
export { trpcErrorPolicy } from './trpcErrorPolicy.js';
export {
  DEFAULT_ERROR_DOCS_URL,
  type IdempotencyErrorData,
  type IdempotencyErrorDataOptions,
  idempotencyErrorFormatter,
  withIdempotencyErrorData,
} from './withIdempotencyErrorData.js';
