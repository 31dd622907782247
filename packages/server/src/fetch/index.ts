export {
  DEFAULT_MAX_BODY_BYTES,
  type HandlerIdempotency,
  type HandlerKeyCall,
  type HandlerTransactionIdempotency,
  type IdempotentHandlerOptions,
  idempotentHandler,
  storeResponseByStatus,
  type TransactionHandlerOptions,
} from './idempotentHandler.js';
export {
  type IdempotencyProblem,
  PROBLEM_CONTENT_TYPE,
  type ProblemCode,
  type ProblemDocument,
} from './problemResponse.js';
export { DEFAULT_REPLAY_HEADERS } from './storedResponse.js';
