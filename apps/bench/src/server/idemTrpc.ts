import { type IdempotencyRequestContext, withIdempotencyErrorData } from '@idem/server';
import { initTRPC } from '@trpc/server';
import superjson from 'superjson';

/** What the bench and soak servers' procedures see: idem's request context and a tenant. */
export interface TenantContext extends IdempotencyRequestContext {
  /** The tenant the call acts for (`x-tenant` header). */
  principal: string;
}

/**
 * tRPC as the bench and soak routers use it: superjson, idem's error data on every error,
 * and `scope`, which keeps each tenant's keys apart (the `scope` option of `idempotent`).
 */
export function initIdemTrpc() {
  const t = initTRPC.context<TenantContext>().create({
    transformer: superjson,
    isDev: false,
    errorFormatter: ({ shape, error }) => withIdempotencyErrorData(shape, error),
  });
  const scope = ({ ctx }: { ctx: TenantContext }) => `tenant:${ctx.principal}`;
  return { t, scope };
}
