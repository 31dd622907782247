import { idempotencyHeaders, idempotencyLink, keyedRetryLink } from '@idem/client';
import { createTRPCClient, httpBatchLink, httpLink, splitLink } from '@trpc/client';
import { createTRPCContext } from '@trpc/tanstack-react-query';
import superjson from 'superjson';
import type { AppRouter } from '@/server/routers/appRouter';
import { attemptLog } from './attemptLog';
import type { Chaos } from './chaos';
import { chaosFetch } from './chaosFetch';
import { sessionId } from './session';

export const { TRPCProvider, useTRPC } = createTRPCContext<AppRouter>();

const url = '/api/trpc';
const sessionHeaders = () => ({ 'x-demo-session': sessionId() });

/**
 * Mutations: a key per call (idempotencyLink), retried with that same key through the
 * chaos network (keyedRetryLink). Queries (the panel's polling) take the plain network.
 */
export function createClient(getChaos: () => Chaos) {
  return createTRPCClient<AppRouter>({
    links: [
      splitLink({
        condition: (op) => op.type === 'mutation',
        true: [
          idempotencyLink(),
          keyedRetryLink({
            maxAttempts: 10,
            baseDelayMs: 100,
            maxDelayMs: 2_000,
            deadlineMs: 30_000,
            onRetry: ({ op, delayMs }) => {
              const key = op.context.idempotencyKey;
              if (typeof key === 'string') attemptLog.retrying(key, delayMs);
            },
          }),
          httpLink({
            url,
            transformer: superjson,
            fetch: chaosFetch(getChaos),
            headers: idempotencyHeaders.with(sessionHeaders),
          }),
        ],
        false: httpBatchLink({ url, transformer: superjson, headers: sessionHeaders }),
      }),
    ],
  });
}
