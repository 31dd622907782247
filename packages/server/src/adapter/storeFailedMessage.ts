/**
 * What a client is told when the idempotency store itself failed (a lost connection, a
 * refused statement). The store's own error stays out of the answer: its message may hold
 * SQL text and values.
 */
export const STORE_FAILED_MESSAGE =
  'The idempotency store failed (it could not be reached, or refused a statement); retry ' +
  'the call with the same key.';
