import { RetryBudgetExhaustedError } from '@idem/core';
import { TRPCClientError } from '@trpc/client';
import type { AnyRouter } from '@trpc/server';
import { describe, expect, it } from 'vitest';
import { errorBody, errorFromHttpLink, json } from '../test/httpLinkErrors.js';
import { httpError, networkError } from '../test/scriptedLink.js';
import { classifyError } from './classifyError.js';
import { isOutcomeUnknown } from './isOutcomeUnknown.js';

// What an error response says. No response at all: classifyError.noResponse.test.ts;
// batches: classifyError.batch.test.ts.

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

  it('idem’s 500 INVALID_CONFIGURATION (the server is set up wrong) is not transient; STORE_FAILED is', async () => {
    const setup = await errorFromHttpLink(async () =>
      json(
        errorBody('INTERNAL_SERVER_ERROR', 500, {
          idempotency: { code: 'INVALID_CONFIGURATION' },
        }),
        500,
      ),
    );
    expect(classifyError(setup)).toMatchObject({ status: 500, transient: false });
    expect(isOutcomeUnknown(setup)).toBe(false);
    const storeFailed = await errorFromHttpLink(async () =>
      json(errorBody('INTERNAL_SERVER_ERROR', 500, { idempotency: { code: 'STORE_FAILED' } }), 500),
    );
    expect(classifyError(storeFailed)).toMatchObject({ status: 500, transient: true });
  });

  it('a JSON body that is not a tRPC response keeps the HTTP status', async () => {
    const error = await errorFromHttpLink(async () => json({ message: 'upstream down' }, 503));
    expect(classifyError(error)).toMatchObject({
      outcome: 'response',
      status: 503,
      transient: true,
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
