import {
  createTRPCUntypedClient,
  httpBatchLink,
  httpLink,
  type TRPCClientError,
} from '@trpc/client';
import type { AnyRouter } from '@trpc/server';

/** Where the tests' tRPC clients send (nothing listens: each test's `fetch` answers). */
export const URL_BASE = 'http://idem.test/trpc';

/** A tRPC error body, as the server's default formatter writes it. */
export function errorBody(code: string, httpStatus: number, extra: Record<string, unknown> = {}) {
  return { error: { message: code, code: -32603, data: { code, httpStatus, ...extra } } };
}

/** The error a real httpLink reports for this fetch behaviour. */
export async function errorFromHttpLink(
  fetch: () => Promise<Response>,
  link: 'httpLink' | 'httpBatchLink' = 'httpLink',
  headers: () => Record<string, string> = () => ({}),
): Promise<TRPCClientError<AnyRouter>> {
  const options = { url: URL_BASE, fetch: async () => fetch(), headers };
  const client = createTRPCUntypedClient({
    links: [link === 'httpLink' ? httpLink(options) : httpBatchLink(options)],
  });
  try {
    await client.query('thing.get');
  } catch (error) {
    return error as TRPCClientError<AnyRouter>;
  }
  throw new Error('expected the call to fail');
}

/**
 * What each operation of one batch fails with when a real httpBatchLink sends it (a query a
 * body item: `op0.get`, `op1.get`, …) and the server answers the batch with `body`, status
 * 207 and `headers`; `undefined` for an operation that succeeded.
 */
export async function batchErrors(
  body: unknown[],
  headers: Record<string, string>,
): Promise<(TRPCClientError<AnyRouter> | undefined)[]> {
  const client = createTRPCUntypedClient({
    links: [httpBatchLink({ url: URL_BASE, fetch: async () => json(body, 207, headers) })],
  });
  const settled = await Promise.allSettled(body.map((_, index) => client.query(`op${index}.get`)));
  return settled.map((result) =>
    result.status === 'rejected' ? (result.reason as TRPCClientError<AnyRouter>) : undefined,
  );
}

/** A JSON response with this status and headers. */
export function json(body: unknown, status: number, headers: Record<string, string> = {}) {
  return new Response(JSON.stringify(body), {
    status,
    headers: { 'content-type': 'application/json', ...headers },
  });
}
