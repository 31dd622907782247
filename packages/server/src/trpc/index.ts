export { batchKeys } from './batchKeys.js';
export type {
  IdempotentBaseOptions,
  KeyCall,
  KeyInput,
  LeaseDbOptions,
  LeaseIdempotency,
  LeaseModeOptions,
  LeaseStoreOptions,
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
