import type { Operation } from '@trpc/client';

/**
 * The name of the operation-context field that carries an idempotency key. The links, the
 * headers helper and callers (`trpc: { context: { idempotencyKey } }`) all use it.
 */
export const IDEMPOTENCY_KEY_CONTEXT_FIELD = 'idempotencyKey';

/** The operation's idempotency key, or `undefined` when it has none. */
export function idempotencyKeyOf(op: Pick<Operation, 'context'>): unknown {
  return op.context[IDEMPOTENCY_KEY_CONTEXT_FIELD];
}
