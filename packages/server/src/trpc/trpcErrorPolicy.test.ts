import { defaultErrorPolicy, taggedJsonSerializer } from '@idem/core';
import { getTRPCErrorFromUnknown, type TRPC_ERROR_CODE_KEY, TRPCError } from '@trpc/server';
import { describe, expect, it } from 'vitest';
import { trpcErrorPolicy } from './trpcErrorPolicy.js';

const STORED: TRPC_ERROR_CODE_KEY[] = [
  'PARSE_ERROR',
  'BAD_REQUEST',
  'PAYMENT_REQUIRED',
  'FORBIDDEN',
  'NOT_FOUND',
  'METHOD_NOT_SUPPORTED',
  'CONFLICT',
  'PRECONDITION_FAILED',
  'PAYLOAD_TOO_LARGE',
  'UNSUPPORTED_MEDIA_TYPE',
  'UNPROCESSABLE_CONTENT',
];
const RELEASED: TRPC_ERROR_CODE_KEY[] = [
  'UNAUTHORIZED',
  'TIMEOUT',
  'PRECONDITION_REQUIRED',
  'TOO_MANY_REQUESTS',
  'CLIENT_CLOSED_REQUEST',
  'INTERNAL_SERVER_ERROR',
  'NOT_IMPLEMENTED',
  'BAD_GATEWAY',
  'SERVICE_UNAVAILABLE',
  'GATEWAY_TIMEOUT',
];

const roundTrip = (error: unknown) =>
  trpcErrorPolicy.fromStored(
    JSON.parse(JSON.stringify(trpcErrorPolicy.toStored(error, taggedJsonSerializer))),
    taggedJsonSerializer,
  ) as TRPCError;

describe('trpcErrorPolicy', () => {
  it.each(STORED)('stores %s', (code) => {
    expect(trpcErrorPolicy.classify(new TRPCError({ code }))).toBe('store');
  });

  it.each(RELEASED)('releases %s', (code) => {
    expect(trpcErrorPolicy.classify(new TRPCError({ code }))).toBe('release');
  });

  it("decides a non-tRPC exception, bare or wrapped by tRPC, by core's rule", () => {
    const wrapped = (cause: unknown) => getTRPCErrorFromUnknown(cause);
    const cases: [unknown, 'store' | 'release'][] = [
      [new Error('socket hang up'), 'release'],
      [Object.assign(new Error('Card declined'), { status: 402 }), 'store'],
      [Object.assign(new Error('bad'), { statusCode: 400 }), 'store'],
      [Object.assign(new Error('nope'), { retryable: false }), 'store'],
      [Object.assign(new Error('busy'), { retryable: true, status: 400 }), 'release'],
      [Object.assign(new Error('rate'), { status: 429 }), 'release'],
      [Object.assign(new Error('auth'), { status: 401 }), 'release'],
      [Object.assign(new Error('down'), { status: 503 }), 'release'],
    ];
    for (const [error, decision] of cases) {
      expect(trpcErrorPolicy.classify(error)).toBe(decision);
      expect(trpcErrorPolicy.classify(wrapped(error))).toBe(decision);
      expect(trpcErrorPolicy.classify(error)).toBe(defaultErrorPolicy.classify(error));
    }
    expect(trpcErrorPolicy.classify('a string')).toBe('release');
    expect(trpcErrorPolicy.classify(null)).toBe('release');
    // A TRPCError's own code decides, whatever its cause says.
    const declined = Object.assign(new Error('x'), { status: 402 });
    expect(trpcErrorPolicy.classify(new TRPCError({ code: 'TIMEOUT', cause: declined }))).toBe(
      'release',
    );
  });

  it('replays a stored error as a TRPCError with the same code, message and cause fields', () => {
    class CardDeclined extends Error {
      declineCode = 'insufficient_funds';
      retryAt = new Date(Date.UTC(2030, 0, 1));
      limit = 10n ** 20n;
      override name = 'CardDeclined';
    }
    const replayed = roundTrip(
      new TRPCError({
        code: 'PAYMENT_REQUIRED',
        message: 'declined',
        cause: new CardDeclined('no'),
      }),
    );
    expect(replayed).toBeInstanceOf(TRPCError);
    expect(replayed.code).toBe('PAYMENT_REQUIRED');
    expect(replayed.message).toBe('declined');
    expect(replayed.cause).toBeInstanceOf(Error);
    expect(replayed.cause?.name).toBe('CardDeclined');
    expect(replayed.cause?.message).toBe('no');
    expect(replayed.cause).toMatchObject({
      declineCode: 'insufficient_funds',
      retryAt: new Date(Date.UTC(2030, 0, 1)),
      limit: 10n ** 20n,
    });
  });

  it("keeps a TRPCError subclass's own fields, and the message tRPC derived from the cause", () => {
    class OutOfStock extends TRPCError {
      readonly sku: string;
      constructor(sku: string) {
        super({ code: 'CONFLICT', message: `${sku} is out of stock` });
        this.sku = sku;
      }
    }
    expect(roundTrip(new OutOfStock('A1'))).toMatchObject({
      code: 'CONFLICT',
      message: 'A1 is out of stock',
      sku: 'A1',
    });
    expect(
      roundTrip(new TRPCError({ code: 'NOT_FOUND', cause: new Error('no such order') })),
    ).toMatchObject({ code: 'NOT_FOUND', message: 'no such order' });
  });

  it('leaves out fields it cannot store, and never copies __proto__', () => {
    const cause = Object.assign(new Error('x'), { callback: () => 1, kept: 1 });
    Object.defineProperty(cause, '__proto__', {
      value: { polluted: true },
      enumerable: true,
    });
    const replayed = roundTrip(new TRPCError({ code: 'BAD_REQUEST', cause }));
    expect(replayed.cause).toMatchObject({ kept: 1 });
    expect(replayed.cause).not.toHaveProperty('callback');
    expect((replayed.cause as unknown as { polluted?: boolean }).polluted).toBeUndefined();
    expect(({} as { polluted?: boolean }).polluted).toBeUndefined();
  });

  it('replays an unknown stored code as INTERNAL_SERVER_ERROR, and stores plain errors as one', () => {
    const replayed = trpcErrorPolicy.fromStored(
      { name: 'TRPCError', code: 'NO_SUCH_CODE', message: 'm' },
      taggedJsonSerializer,
    );
    expect(replayed).toMatchObject({ code: 'INTERNAL_SERVER_ERROR', message: 'm' });
    expect(trpcErrorPolicy.toStored(new Error('boom'), taggedJsonSerializer)).toEqual({
      name: 'TRPCError',
      code: 'INTERNAL_SERVER_ERROR',
      message: 'boom',
    });
  });
});
