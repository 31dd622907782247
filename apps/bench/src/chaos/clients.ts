import { idempotencyHeaders, idempotencyLink, keyedRetryLink } from '@idem/client';
import { createTRPCClient, httpLink } from '@trpc/client';
import superjson from 'superjson';
import type { ChaosRouter } from './chaosRouter.js';

export type ChaosProcedure = 'placeOrder' | 'charge';

/** One logical request: one key, one business id, however many HTTP attempts it takes. */
export interface LogicalRequest {
  index: number;
  procedure: ChaosProcedure;
  key: string;
  input: { businessId: string; amountCents: number };
  /** The answer the client finally received (undefined: none yet). */
  answer?: unknown;
  /** The last error, when the call failed. */
  error?: string | undefined;
  /** Answered only by the recovery pass after the chaos. */
  recovered?: boolean;
}

export interface ClientCounters {
  /** HTTP requests sent (first tries and retries). */
  attempts: number;
  /** Retries scheduled by keyedRetryLink. */
  retries: number;
  /** Answers marked `Idempotent-Replayed: true`. */
  replays: number;
  /** 409 answers (key busy or lease lost). */
  conflicts: number;
  /** Fetches that got no response at all (dropped, reset, refused). */
  noResponse: number;
}

export function clientCounters(): ClientCounters {
  return { attempts: 0, retries: 0, replays: 0, conflicts: 0, noResponse: 0 };
}

/**
 * A tRPC client as an app would build it with @idem/client: `idempotencyLink` (the key is
 * the caller's, kept on every retry), `keyedRetryLink` (transient failures only, backoff
 * with jitter, honours Retry-After), `httpLink` with `idempotencyHeaders`. The fetch is
 * wrapped only to count what happened on the wire.
 */
export function chaosClient(url: string, counters: ClientCounters) {
  const countingFetch = async (input: string | URL | Request, init?: object) => {
    counters.attempts++;
    try {
      // The cast bridges tRPC's init type under exactOptionalPropertyTypes.
      const response = await fetch(input, init as RequestInit);
      if (response.headers.get('idempotent-replayed') === 'true') counters.replays++;
      if (response.status === 409) counters.conflicts++;
      return response;
    } catch (error) {
      counters.noResponse++;
      throw error;
    }
  };
  return createTRPCClient<ChaosRouter>({
    links: [
      idempotencyLink(),
      keyedRetryLink({
        maxAttempts: 60,
        baseDelayMs: 50,
        maxDelayMs: 1_000,
        deadlineMs: 60_000,
        // The soak is about correctness under faults, not about shedding load: keep retrying.
        budget: false,
        onRetry: () => {
          counters.retries++;
        },
      }),
      httpLink({
        url,
        transformer: superjson,
        fetch: countingFetch,
        headers: idempotencyHeaders.with({ 'x-tenant': 'chaos' }),
      }),
    ],
  });
}

/** Sends `requests` through `workers` concurrent loops; each loop waits for its answer. */
export async function sendAll(
  client: ReturnType<typeof chaosClient>,
  requests: readonly LogicalRequest[],
  workers: number,
  onDone: () => void = () => {},
): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: workers }, async () => {
      for (let request = requests[next++]; request; request = requests[next++]) {
        try {
          request.answer = await client[request.procedure].mutate(request.input, {
            context: { idempotencyKey: request.key },
          });
          request.error = undefined;
        } catch (error) {
          request.error = error instanceof Error ? error.message : String(error);
        }
        onDone();
      }
    }),
  );
}
