import { idempotencyHeaders, retryingIdempotencyLink } from '@idem/client';
import { createTRPCClient, httpBatchLink, httpLink, splitLink } from '@trpc/client';
import { createTRPCContext } from '@trpc/tanstack-react-query';
import superjson from 'superjson';
import type { AppRouter } from '@/server/routers/appRouter';
import { attemptLog } from './attemptLog';
import type { Chaos } from './chaos';
import { CALL_HEADER, chaosFetch } from './chaosFetch';
import { sessionId } from './session';

export const { TRPCProvider, useTRPC, useTRPCClient } = createTRPCContext<AppRouter>();

const url = '/api/trpc';
const SESSION_HEADER = 'x-demo-session';
const sessionHeaders = () => ({ [SESSION_HEADER]: sessionId() });

/** What the checkout form puts in a Pay call's context. */
export interface PayContext {
  idempotencyKey: string;
  /** Which Pay press (1, or 2 for a double click's second): the panel groups by it. */
  demoCall: number;
}

/**
 * Mutations: a key per call, retried with that same key (retryingIdempotencyLink). Pay
 * goes through the chaos network, which logs every attempt for the panel; opening and
 * preparing the checkout take the plain network (the chaos switches are about Pay).
 * Queries (the panel's polling) are batched on the plain network, outside the link: TanStack
 * Query retries them.
 */
export function createClient(getChaos: () => Chaos) {
  return createTRPCClient<AppRouter>({
    links: [
      splitLink({
        condition: (op) => op.type === 'mutation',
        true: [
          retryingIdempotencyLink({
            maxAttempts: 10,
            baseDelayMs: 100,
            maxDelayMs: 2_000,
            deadlineMs: 30_000,
            onRetry: ({ op, delayMs }) => {
              const { idempotencyKey, demoCall } = op.context as Partial<PayContext>;
              if (typeof idempotencyKey === 'string' && typeof demoCall === 'number') {
                attemptLog.retrying(idempotencyKey, demoCall, delayMs);
              }
            },
          }),
          splitLink({
            condition: (op) => op.path === 'checkout.pay',
            true: httpLink({
              url,
              transformer: superjson,
              fetch: chaosFetch(getChaos),
              headers: idempotencyHeaders.with(({ op }) => ({
                ...sessionHeaders(),
                [CALL_HEADER]: String((op.context as Partial<PayContext>).demoCall ?? 1),
              })),
            }),
            false: httpLink({
              url,
              transformer: superjson,
              headers: idempotencyHeaders.with(sessionHeaders),
            }),
          }),
        ],
        false: httpBatchLink({ url, transformer: superjson, headers: sessionHeaders }),
      }),
    ],
  });
}
