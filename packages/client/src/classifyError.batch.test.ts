import { describe, expect, it } from 'vitest';
import { batchErrors, errorBody } from '../test/httpLinkErrors.js';
import { httpError } from '../test/scriptedLink.js';
import { classifyError } from './classifyError.js';

// A batch: each operation judged by its own error, and idem's batch header.

describe('classifyError on errors from the real httpLink', () => {
  it('a batch answered 207: each operation is judged by its own error', async () => {
    const [missing, unavailable] = await batchErrors(
      [errorBody('NOT_FOUND', 404), errorBody('SERVICE_UNAVAILABLE', 503)],
      { 'Retry-After': '3' },
    );
    expect(classifyError(missing, 0)).toMatchObject({ status: 404, transient: false });
    expect(classifyError(unavailable, 0)).toMatchObject({
      status: 503,
      retryAfterMs: 3_000,
      transient: true,
    });
  });

  it('Idempotency-Status-Batch marks a 409 of the batch as busy; other errors stay as they are', async () => {
    const [, conflict, internal] = await batchErrors(
      [
        { result: { data: 'fine' } },
        errorBody('CONFLICT', 409),
        errorBody('INTERNAL_SERVER_ERROR', 500),
      ],
      { 'Idempotency-Status-Batch': '{"1":"in-progress"}', 'Retry-After': '2' },
    );
    expect(classifyError(conflict, 0)).toMatchObject({
      status: 409,
      idempotencyStatus: 'in-progress',
      retryAfterMs: 2_000,
      transient: true,
    });
    expect(classifyError(internal)).toMatchObject({ status: 500, idempotencyStatus: undefined });
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
    const [conflict, internal] = await batchErrors(
      [errorBody('CONFLICT', 409), errorBody('INTERNAL_SERVER_ERROR', 500)],
      { 'Idempotency-Status': 'in-progress' },
    );
    expect(classifyError(conflict)).toMatchObject({ idempotencyStatus: 'in-progress' });
    expect(classifyError(internal)).toMatchObject({ status: 500, idempotencyStatus: undefined });
  });
});
