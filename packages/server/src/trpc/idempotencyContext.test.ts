import { isInvalidKeyError } from '@idem/core';
import { describe, expect, it } from 'vitest';
import { idempotencyContext } from './idempotencyContext.js';

const request = (url: string, headers: Record<string, string> = {}) =>
  new Request(`http://localhost${url}`, { headers });

describe('idempotencyContext', () => {
  it('reads Idempotency-Key on a single call and Idempotency-Key-Batch by index on a batch', () => {
    const single = idempotencyContext({ req: request('/trpc/a', { 'Idempotency-Key': 'k1' }) });
    expect(single.idempotencyRequest.keyOf(0)).toBe('k1');
    const batch = idempotencyContext({
      req: request('/trpc/a,b,c?batch=1', { 'Idempotency-Key-Batch': '{"0":"k0","2":"k2"}' }),
    });
    expect([0, 1, 2].map((index) => batch.idempotencyRequest.keyOf(index))).toEqual([
      'k0',
      undefined,
      'k2',
    ]);
  });

  it("prefers tRPC's info.isBatchCall to the URL", () => {
    const context = idempotencyContext({
      req: request('/trpc/a', { 'Idempotency-Key-Batch': '{"0":"k0"}' }),
      info: { isBatchCall: true },
    });
    expect(context.idempotencyRequest.keyOf(0)).toBe('k0');
  });

  it("accepts Node's IncomingHttpHeaders (lower-case names, arrays for repeats)", () => {
    const context = idempotencyContext({
      req: { headers: { 'idempotency-key': 'node-key' }, url: '/trpc/a' },
    });
    expect(context.idempotencyRequest.keyOf(0)).toBe('node-key');
    const batch = idempotencyContext({
      req: { headers: { 'idempotency-key-batch': '{"1":"b"}' }, url: '/trpc/a,b?batch=1' },
    });
    expect(batch.idempotencyRequest.keyOf(1)).toBe('b');
  });

  it("reads a Node request's rawHeaders: a key with a comma is one field's, two fields are refused", () => {
    const refusal = (keyOf: () => unknown) => {
      try {
        keyOf();
      } catch (caught) {
        return isInvalidKeyError(caught) ? caught.message : 'another error';
      }
      return 'accepted';
    };
    // One field holding a quoted key with a comma: the raw list proves it is one key.
    const one = idempotencyContext({
      req: {
        headers: { 'idempotency-key': '"cart 7, try 2"' },
        rawHeaders: ['Host', 'x', 'Idempotency-Key', '"cart 7, try 2"'],
        url: '/trpc/a',
      },
    });
    expect(one.idempotencyRequest.keyOf(0)).toBe('cart 7, try 2');
    // The fields "a and b" that Node joined: the same joined text, two raw fields.
    const joined = idempotencyContext({
      req: {
        headers: { 'idempotency-key': '"a, b"' },
        rawHeaders: ['idempotency-key', '"a', 'IDEMPOTENCY-KEY', 'b"'],
        url: '/trpc/a',
      },
    });
    expect(refusal(() => joined.idempotencyRequest.keyOf(0))).toMatch(/more than one/);
    // Without a raw list (fetch's Headers) the comma cannot be told from a join: refused.
    const fetched = idempotencyContext({
      req: request('/trpc/a', { 'Idempotency-Key': '"cart 7, try 2"' }),
    });
    expect(refusal(() => fetched.idempotencyRequest.keyOf(0))).toMatch(/cannot tell apart/);
    // Batches alike.
    const batchOf = (rawHeaders?: string[]) =>
      idempotencyContext({
        req: {
          headers: { 'idempotency-key-batch': '{"0":"a, b"}' },
          url: '/trpc/a?batch=1',
          ...(rawHeaders && { rawHeaders }),
        },
      }).idempotencyRequest;
    expect(batchOf(['Idempotency-Key-Batch', '{"0":"a, b"}']).keyOf(0)).toBe('a, b');
    expect(
      refusal(() =>
        batchOf(['Idempotency-Key-Batch', '{"0":"a', 'Idempotency-Key-Batch', 'b"}']).keyOf(0),
      ),
    ).toMatch(/more than one Idempotency-Key-Batch/);
    expect(refusal(() => batchOf().keyOf(0))).toMatch(/holds a comma/);
  });

  it('refuses a batch index with a leading zero or a sign', () => {
    for (const header of ['{"01":"k"}', '{"-1":"k"}', '{"1.0":"k"}']) {
      const context = idempotencyContext({
        req: request('/trpc/a?batch=1', { 'Idempotency-Key-Batch': header }),
      });
      const error = (() => {
        try {
          context.idempotencyRequest.keyOf(0);
        } catch (caught) {
          return caught;
        }
      })();
      expect(isInvalidKeyError(error) && error.reason).toBe('malformed_header');
    }
  });

  it.each([
    {
      what: 'writes replay and busy headers for a single call',
      url: '/trpc/a',
      replayed: [0],
      busy: [[0, 'in-progress', 1_001]] as const,
      headers: {
        'idempotent-replayed': 'true',
        'idempotency-status': 'in-progress',
        'retry-after': '2',
      },
    },
    {
      what: 'collects per-operation headers for a batch, with the longest Retry-After',
      url: '/trpc/a,b,c,d?batch=1',
      replayed: [2, 0],
      busy: [
        [3, 'in-progress', 5_000],
        [1, 'lease-lost', 0],
      ] as const,
      headers: {
        'idempotent-replayed-batch': '[0,2]',
        'idempotency-status-batch': '{"1":"lease-lost","3":"in-progress"}',
        'retry-after': '5',
      },
    },
  ])('$what', ({ url, replayed, busy, headers }) => {
    const resHeaders = new Headers();
    const { idempotencyRequest } = idempotencyContext({ req: request(url), resHeaders });
    for (const index of replayed) idempotencyRequest.markReplayed(index);
    for (const [index, status, retryAfterMs] of busy) {
      idempotencyRequest.markBusy(index, status, retryAfterMs);
    }
    expect(Object.fromEntries(resHeaders)).toEqual(headers);
  });

  it('carries the key of a createCaller call, with or without response headers', () => {
    const { idempotencyRequest } = idempotencyContext({ key: 'server-key' });
    expect(idempotencyRequest.keyOf(0)).toBe('server-key');
    expect(() => idempotencyRequest.markReplayed(0)).not.toThrow();
    expect(idempotencyContext({ key: undefined }).idempotencyRequest.keyOf(0)).toBeUndefined();
  });

  it('reads the Structured Field string and the bare spelling as one key', () => {
    const keyOf = (value: string) =>
      idempotencyContext({
        req: request('/trpc/a', { 'Idempotency-Key': value }),
      }).idempotencyRequest.keyOf(0);
    expect(keyOf('8e03978e-40d5')).toBe('8e03978e-40d5');
    expect(keyOf('"8e03978e-40d5"')).toBe('8e03978e-40d5');
    expect(keyOf('"a \\"quoted\\" key with a \\\\"')).toBe('a "quoted" key with a \\');
    expect(keyOf('""')).toBe('');
    // Node's headers too.
    const node = idempotencyContext({
      req: { headers: { 'idempotency-key': '"node-key"' }, url: '/trpc/a' },
    });
    expect(node.idempotencyRequest.keyOf(0)).toBe('node-key');
  });

  it.each([
    ['two fields, joined by fetch or Node', 'k-a, k-b', 'more than one Idempotency-Key'],
    ['a list of strings', '"k-a", "k-b"', 'more than one Idempotency-Key'],
    ['a comma in a bare key', 'k-a,b', 'more than one Idempotency-Key'],
    ['an unterminated string', '"k-a', 'has no closing quote'],
    ['another escape', '"k\\n"', 'escapes neither'],
    ['parameters after the string', '"k-a";v=1', 'something follows the closing quote'],
  ])('refuses %s as malformed_header, without echoing it', (_what, value, expected) => {
    const { idempotencyRequest } = idempotencyContext({
      req: request('/trpc/a', { 'Idempotency-Key': value }),
    });
    let caught: unknown;
    try {
      idempotencyRequest.keyOf(0);
    } catch (error) {
      caught = error;
    }
    expect(isInvalidKeyError(caught)).toBe(true);
    expect(caught).toMatchObject({ reason: 'malformed_header' });
    expect((caught as Error).message).toContain(expected);
    expect((caught as Error).message).not.toContain('k-a');
  });

  it('refuses two Idempotency-Key-Batch fields with a message that says so', () => {
    const batch = idempotencyContext({
      req: request('/trpc/a,b?batch=1', {
        'Idempotency-Key-Batch': '{"0":"a"}, {"1":"b"}',
      }),
    });
    expect(() => batch.idempotencyRequest.keyOf(0)).toThrow(
      'more than one Idempotency-Key-Batch field',
    );
  });
});
