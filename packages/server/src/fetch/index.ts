export type {
  HandlerKeyCall,
  IdempotentHandlerOptions,
  TransactionHandlerOptions,
} from './IdempotentHandlerOptions.js';
export {
  DEFAULT_MAX_BODY_BYTES,
  idempotentHandler,
  storeResponseByStatus,
} from './idempotentHandler.js';
export {
  type IdempotencyProblem,
  PROBLEM_CONTENT_TYPE,
  type ProblemCode,
  type ProblemDocument,
} from './problemResponse.js';
export { DEFAULT_REPLAY_HEADERS } from './storedResponse.js';
