import { InvalidKeyError, RetryBudgetExhaustedError } from '@idem/core';
import { createTRPCUntypedClient, httpBatchLink, httpLink, TRPCClientError } from '@trpc/client';
import type { AnyRouter } from '@trpc/server';
import { describe, expect, it } from 'vitest';
import { httpError, networkError } from '../test/scriptedLink.js';
import { classifyError } from './classifyError.js';
import { isOutcomeUnknown } from './isOutcomeUnknown.js';

const URL_BASE = 'http://idem.test/trpc';

function errorBody(code: string, httpStatus: number, extra: Record<string, unknown> = {}) {
  return { error: { message: code, code: -32603, data: { code, httpStatus, ...extra } } };
}

/** The error a real httpLink reports for this fetch behaviour. */
async function errorFromHttpLink(
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

function json(body: unknown, status: number, headers: Record<string, string> = {}) {
  return new Response(JSON.stringify(body), {
    status,
    headers: { 'content-type': 'application/json', ...headers },
  });
}

describe('classifyError on errors from the real httpLink', () => {
  it('a tRPC error response: status, Retry-After, transient', async () => {
    const error = await errorFromHttpLink(async () =>
      json(errorBody('SERVICE_UNAVAILABLE', 503), 503, { 'retry-after': '2' }),
    );
    expect(classifyError(error, 0)).toEqual({
      outcome: 'response',
      status: 503,
      idempotencyStatus: undefined,
      retryAfterMs: 2_000,
      transient: true,
    });
  });

  it('idem’s 409 in progress, by header alone and by error data', async () => {
    const byHeader = await errorFromHttpLink(async () =>
      json(errorBody('CONFLICT', 409), 409, {
        'Idempotency-Status': 'in-progress',
        'Retry-After': '1',
      }),
    );
    expect(classifyError(byHeader, 0)).toMatchObject({
      status: 409,
      idempotencyStatus: 'in-progress',
      retryAfterMs: 1_000,
      transient: true,
    });

    const byData = await errorFromHttpLink(async () =>
      json(
        errorBody('CONFLICT', 409, {
          idempotency: { code: 'REQUEST_IN_PROGRESS', retryAfterMs: 750 },
        }),
        409,
      ),
    );
    expect(classifyError(byData, 0)).toMatchObject({
      idempotencyStatus: 'in-progress',
      retryAfterMs: 750,
    });
  });

  it('idem’s 409 lease lost (this attempt was taken over) is transient too', async () => {
    const byData = await errorFromHttpLink(async () =>
      json(
        errorBody('CONFLICT', 409, { idempotency: { code: 'LEASE_LOST', retryAfterMs: 0 } }),
        409,
      ),
    );
    expect(classifyError(byData, 0)).toMatchObject({
      idempotencyStatus: 'lease-lost',
      retryAfterMs: 0,
      transient: true,
    });
    const byHeader = await errorFromHttpLink(async () =>
      json(errorBody('CONFLICT', 409), 409, { 'Idempotency-Status': 'lease-lost' }),
    );
    expect(classifyError(byHeader)).toMatchObject({
      idempotencyStatus: 'lease-lost',
      transient: true,
    });
  });

  it('an unknown Idempotency-Status value does not make a 409 transient', async () => {
    const error = await errorFromHttpLink(async () =>
      json(errorBody('CONFLICT', 409), 409, { 'Idempotency-Status': 'done' }),
    );
    expect(classifyError(error)).toMatchObject({ idempotencyStatus: undefined, transient: false });
  });

  it('any other CONFLICT is not transient', async () => {
    const error = await errorFromHttpLink(async () => json(errorBody('CONFLICT', 409), 409));
    expect(classifyError(error)).toMatchObject({
      status: 409,
      idempotencyStatus: undefined,
      transient: false,
    });
  });

  it('a network failure is "no response"', async () => {
    const error = await errorFromHttpLink(async () => {
      throw new TypeError('fetch failed');
    });
    expect(classifyError(error)).toMatchObject({ outcome: 'no-response', transient: true });
  });

  it('a proxy’s HTML error page is "no response" (httpLink cannot show its status)', async () => {
    const error = await errorFromHttpLink(
      async () => new Response('<html>502 Bad Gateway</html>', { status: 502 }),
    );
    expect(classifyError(error)).toMatchObject({ outcome: 'no-response', transient: true });
  });

  it('a JSON body that is not a tRPC response keeps the HTTP status', async () => {
    const error = await errorFromHttpLink(async () => json({ message: 'upstream down' }, 503));
    expect(classifyError(error)).toMatchObject({
      outcome: 'response',
      status: 503,
      transient: true,
    });
  });

  it('a refused connection through the real fetch is "no response"', async () => {
    // Port 9 (discard) on loopback: nothing listens there, so the connection is refused.
    const client = createTRPCUntypedClient({
      links: [httpLink({ url: 'http://127.0.0.1:9/trpc' })],
    });
    const error = await client.query('thing.get').then(
      () => expect.unreachable(),
      (thrown: unknown) => thrown,
    );
    expect(classifyError(error)).toMatchObject({ outcome: 'no-response', transient: true });
  });

  it.each([
    ['Chromium', 'Failed to fetch'],
    ['Firefox', 'NetworkError when attempting to fetch resource.'],
    ['Safari', 'Load failed'],
    ['React Native', 'Network request failed'],
  ])('fetch’s network error as %s words it is "no response"', async (_runtime, message) => {
    const error = await errorFromHttpLink(async () => {
      throw new TypeError(message);
    });
    expect(classifyError(error)).toMatchObject({ outcome: 'no-response', transient: true });
  });

  it.each([
    'ECONNRESET',
    'ECONNREFUSED',
    'ETIMEDOUT',
    'EPIPE',
    'EAI_AGAIN',
    'UND_ERR_SOCKET',
    'UND_ERR_HEADERS_TIMEOUT',
  ])('a socket error %s anywhere in the cause chain is "no response"', async (code) => {
    const socketError = Object.assign(new Error(`connect ${code} 127.0.0.1:80`), { code });
    const wrapped = await errorFromHttpLink(async () => {
      throw new Error('custom fetch failed', { cause: socketError });
    });
    expect(classifyError(wrapped)).toMatchObject({ outcome: 'no-response', transient: true });
    const bare = await errorFromHttpLink(async () => {
      throw socketError;
    });
    expect(isOutcomeUnknown(bare)).toBe(true);
  });

  it('a TimeoutError (AbortSignal.timeout() in a custom fetch) is "no response"', async () => {
    const error = await errorFromHttpLink(async () => {
      throw new DOMException('The operation timed out.', 'TimeoutError');
    });
    expect(classifyError(error)).toMatchObject({ outcome: 'no-response', transient: true });
  });

  it('a TypeError thrown by the app’s own headers callback is a bug, not "no response"', async () => {
    const error = await errorFromHttpLink(
      async () => json({ result: { data: 1 } }, 200),
      'httpLink',
      () => {
        const session = undefined as unknown as { token: string };
        return { authorization: session.token };
      },
    );
    expect(error.cause?.name).toBe('TypeError');
    expect(classifyError(error)).toMatchObject({ outcome: 'other', transient: false });
  });

  it('a SyntaxError thrown by the app’s own code is a bug, not "no response"', async () => {
    const error = await errorFromHttpLink(
      async () => json({ result: { data: 1 } }, 200),
      'httpBatchLink',
      () => JSON.parse('{"authorization": Bearer}') as Record<string, string>,
    );
    expect(error.cause?.name).toBe('SyntaxError');
    expect(classifyError(error)).toMatchObject({ outcome: 'other', transient: false });
  });

  it('other TypeErrors from fetch (an invalid header value) are not "no response"', async () => {
    const error = await errorFromHttpLink(() =>
      fetch('http://127.0.0.1:9/', { headers: { 'x-a': 'b\r\nc' } }),
    );
    expect(error.cause?.name).toBe('TypeError');
    expect(classifyError(error)).toMatchObject({ outcome: 'other', transient: false });
  });

  it('an abort is neither a response nor retryable', async () => {
    const error = await errorFromHttpLink(async () => {
      throw new DOMException('This operation was aborted', 'AbortError');
    });
    expect(classifyError(error)).toMatchObject({ outcome: 'other', transient: false });
  });

  it('an error thrown before sending (an invalid key) is not retryable', () => {
    const error = new InvalidKeyError('empty', 'empty key');
    expect(classifyError(error)).toMatchObject({ outcome: 'other', transient: false });
  });

  it('a batch answered 207: each operation is judged by its own error', async () => {
    const client = createTRPCUntypedClient({
      links: [
        httpBatchLink({
          url: URL_BASE,
          fetch: async () =>
            json([errorBody('NOT_FOUND', 404), errorBody('SERVICE_UNAVAILABLE', 503)], 207, {
              'Retry-After': '3',
            }),
        }),
      ],
    });
    const [missing, unavailable] = await Promise.allSettled([
      client.query('a.get'),
      client.query('b.get'),
    ]);
    expect(missing?.status === 'rejected' && classifyError(missing.reason, 0)).toMatchObject({
      status: 404,
      transient: false,
    });
    expect(
      unavailable?.status === 'rejected' && classifyError(unavailable.reason, 0),
    ).toMatchObject({ status: 503, retryAfterMs: 3_000, transient: true });
  });

  it('Idempotency-Status-Batch marks a 409 of the batch as busy; other errors stay as they are', async () => {
    const client = createTRPCUntypedClient({
      links: [
        httpBatchLink({
          url: URL_BASE,
          fetch: async () =>
            json(
              [
                { result: { data: 'fine' } },
                errorBody('CONFLICT', 409),
                errorBody('INTERNAL_SERVER_ERROR', 500),
              ],
              207,
              { 'Idempotency-Status-Batch': '{"1":"in-progress"}', 'Retry-After': '2' },
            ),
        }),
      ],
    });
    const [, conflict, internal] = await Promise.allSettled([
      client.query('a.get'),
      client.query('b.get'),
      client.query('c.get'),
    ]);
    expect(conflict?.status === 'rejected' && classifyError(conflict.reason, 0)).toMatchObject({
      status: 409,
      idempotencyStatus: 'in-progress',
      retryAfterMs: 2_000,
      transient: true,
    });
    expect(internal?.status === 'rejected' && classifyError(internal.reason)).toMatchObject({
      status: 500,
      idempotencyStatus: undefined,
    });
  });

  it('a malformed Idempotency-Status-Batch is ignored', () => {
    for (const header of ['not json', '[1,2]', '{"0":42}', 'null']) {
      const error = httpError({ status: 409, headers: { 'Idempotency-Status-Batch': header } });
      expect(classifyError(error)).toMatchObject({
        idempotencyStatus: undefined,
        transient: false,
      });
    }
  });

  it('a batch-wide in-progress header only marks the operation whose own error is a 409', async () => {
    const client = createTRPCUntypedClient({
      links: [
        httpBatchLink({
          url: URL_BASE,
          fetch: async () =>
            json([errorBody('CONFLICT', 409), errorBody('INTERNAL_SERVER_ERROR', 500)], 207, {
              'Idempotency-Status': 'in-progress',
            }),
        }),
      ],
    });
    const [conflict, internal] = await Promise.allSettled([
      client.query('a.get'),
      client.query('b.get'),
    ]);
    expect(conflict?.status === 'rejected' && classifyError(conflict.reason)).toMatchObject({
      idempotencyStatus: 'in-progress',
    });
    expect(internal?.status === 'rejected' && classifyError(internal.reason)).toMatchObject({
      status: 500,
      idempotencyStatus: undefined,
    });
  });
});

describe('classifyError: a call keyedRetryLink gave up on (budget exhausted)', () => {
  /** What keyedRetryLink throws when its budget refuses a retry after `last`. */
  function exhausted(last: TRPCClientError<AnyRouter>) {
    const cause = new RetryBudgetExhaustedError({ cause: last });
    return new (last.constructor as typeof TRPCClientError)(cause.message, {
      cause,
      result: last.shape ? { id: null, error: last.shape } : null,
      ...(last.meta ? { meta: last.meta } : {}),
    });
  }

  it('looks through RetryBudgetExhaustedError to the failure it wraps: outcome unknown', () => {
    const afterNoResponse = exhausted(networkError());
    expect(classifyError(afterNoResponse)).toMatchObject({
      outcome: 'no-response',
      transient: true,
    });
    expect(isOutcomeUnknown(afterNoResponse)).toBe(true);

    const afterBusy = exhausted(
      httpError({ status: 409, idempotency: { code: 'REQUEST_IN_PROGRESS', retryAfterMs: 500 } }),
    );
    expect(classifyError(afterBusy, 0)).toMatchObject({
      status: 409,
      idempotencyStatus: 'in-progress',
      transient: true,
    });
    expect(isOutcomeUnknown(afterBusy)).toBe(true);
  });

  it('the bare RetryBudgetExhaustedError, as core throws it, too', () => {
    expect(isOutcomeUnknown(new RetryBudgetExhaustedError({ cause: networkError() }))).toBe(true);
  });

  it('isOutcomeUnknown is false for a decision of the server or a bug', () => {
    expect(isOutcomeUnknown(httpError({ status: 422 }))).toBe(false);
    expect(isOutcomeUnknown(httpError({ status: 402, code: 'PAYMENT_REQUIRED' }))).toBe(false);
    expect(isOutcomeUnknown(new TypeError('Cannot read properties of undefined'))).toBe(false);
    expect(isOutcomeUnknown(httpError({ status: 503 }))).toBe(true);
  });
});

describe('classifyError: fallbacks', () => {
  it('uses the error code when data.httpStatus is missing, as tRPC’s getHTTPStatusCode does', () => {
    expect(classifyError(httpError({ status: 429, omitHttpStatus: true }))).toMatchObject({
      status: 429,
      transient: true,
    });
    // An error shape without data (a custom formatter) and without the response.
    const shapeOnly = TRPCClientError.from({ error: { code: -32004, message: 'nope' } });
    expect(shapeOnly.data).toBeUndefined();
    expect(classifyError(shapeOnly)).toMatchObject({ status: 404, transient: false });
    // Every 5xx shares one JSON-RPC code: without data.httpStatus tRPC's server answers
    // 500, and so does this reading, still transient.
    expect(classifyError(httpError({ status: 503, omitHttpStatus: true }))).toMatchObject({
      status: 500,
      transient: true,
    });
  });

  it('a code tRPC does not define falls back to the response’s status', () => {
    const body = { error: { code: -1, message: 'not tRPC’s', data: {} } };
    const response = new Response(JSON.stringify(body), { status: 503 });
    const error = TRPCClientError.from(body, { meta: { response } });
    expect(classifyError(error)).toMatchObject({ status: 503, transient: true });
  });

  it('reads only TRPCClientErrors for a status, not look-alike objects', () => {
    const lookAlike = { shape: { code: -32029, message: 'slow down' }, data: { httpStatus: 429 } };
    expect(classifyError(lookAlike)).toMatchObject({ outcome: 'other', transient: false });
  });

  it('ignores a negative or non-numeric retryAfterMs and falls back to the header', () => {
    const error = httpError({
      status: 409,
      idempotency: { code: 'REQUEST_IN_PROGRESS', retryAfterMs: -5 },
      headers: { 'Retry-After': '4' },
    });
    expect(classifyError(error, 0).retryAfterMs).toBe(4_000);
  });

  it('isOutcomeUnknown is the default policy (what retryOn gets as `transient`)', () => {
    expect(isOutcomeUnknown(httpError({ status: 502 }))).toBe(true);
    expect(isOutcomeUnknown(httpError({ status: 422 }))).toBe(false);
    expect(isOutcomeUnknown(new TypeError('Failed to fetch'))).toBe(true);
    expect(isOutcomeUnknown(new Error('boom'))).toBe(false);
    expect(isOutcomeUnknown(new TypeError('x is not a function'))).toBe(false);
    expect(isOutcomeUnknown(new SyntaxError('Unexpected token'))).toBe(false);
    expect(isOutcomeUnknown(null)).toBe(false);
    expect(isOutcomeUnknown('a string')).toBe(false);
  });
});
