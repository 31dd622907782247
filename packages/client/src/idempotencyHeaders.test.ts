import { IDEMPOTENCY_KEY_BATCH_HEADER, IDEMPOTENCY_KEY_HEADER, InvalidKeyError } from '@idem/core';
import { parseKeyHeader } from '@idem/core/store';
import { createTRPCUntypedClient, httpBatchLink, httpLink, type Operation } from '@trpc/client';
import { describe, expect, expectTypeOf, it } from 'vitest';
import { idempotencyHeaders } from './idempotencyHeaders.js';
import { idempotencyLink } from './links/idempotencyLink.js';

const op = (idempotencyKey?: unknown) =>
  ({ context: idempotencyKey === undefined ? {} : { idempotencyKey } }) as Pick<
    Operation,
    'context'
  >;

describe('idempotencyHeaders', () => {
  it('a single operation sends Idempotency-Key', () => {
    expect(idempotencyHeaders({ op: op('k-1') })).toEqual({ 'Idempotency-Key': 'k-1' });
    expect(IDEMPOTENCY_KEY_HEADER).toBe('Idempotency-Key');
  });

  it('a key the bare form would garble is sent as a quoted string, read back as the same key', () => {
    for (const key of ['cart 7, try 2', '"quoted', ' padded ']) {
      const value = idempotencyHeaders({ op: op(key) })['Idempotency-Key'];
      if (value === undefined) expect.unreachable(`no Idempotency-Key header for ${key}`);
      expect(value.startsWith('"')).toBe(true);
      // One field on the wire: a server that reads the raw field list takes it whole.
      expect(parseKeyHeader(value, { fieldCount: 1 })).toBe(key);
    }
  });

  it('no key, no header', () => {
    expect(idempotencyHeaders({ op: op() })).toEqual({});
    expect(idempotencyHeaders({ opList: [op(), op()] })).toEqual({});
  });

  it('a batch sends one key per keyed operation, by batch index', () => {
    const headers = idempotencyHeaders({ opList: [op('k-0'), op(), op('k-2')] });
    expect(Object.keys(headers)).toEqual([IDEMPOTENCY_KEY_BATCH_HEADER]);
    expect(headers[IDEMPOTENCY_KEY_BATCH_HEADER]).toBe('{"0":"k-0","2":"k-2"}');
    expect(JSON.parse(headers['Idempotency-Key-Batch'] ?? '')).toEqual({ 0: 'k-0', 2: 'k-2' });
  });

  it('a batch of one still uses the batch header', () => {
    expect(idempotencyHeaders({ opList: [op('only')] })).toEqual({
      'Idempotency-Key-Batch': '{"0":"only"}',
    });
  });

  it('keys are JSON-escaped in the batch header', () => {
    const headers = idempotencyHeaders({ opList: [op('a"b\\c')] });
    expect(JSON.parse(headers['Idempotency-Key-Batch'] ?? '')).toEqual({ 0: 'a"b\\c' });
  });

  it('refuses a key that could inject a header', () => {
    expect(() => idempotencyHeaders({ op: op('a\r\nX-Evil: 1') })).toThrow(InvalidKeyError);
    expect(() => idempotencyHeaders({ opList: [op('ok'), op('')] })).toThrow(InvalidKeyError);
  });

  it('.with merges the app’s headers: an object, a Headers, a sync or async callback', async () => {
    const input = { op: op('k-1') };
    expect(await idempotencyHeaders.with({ authorization: 'Bearer t' })(input)).toEqual({
      authorization: 'Bearer t',
      'Idempotency-Key': 'k-1',
    });
    expect(await idempotencyHeaders.with(new Headers({ 'X-Trace': 'abc' }))(input)).toEqual({
      'x-trace': 'abc',
      'Idempotency-Key': 'k-1',
    });
    expect(await idempotencyHeaders.with(() => ({ a: '1', skipped: undefined }))(input)).toEqual({
      a: '1',
      'Idempotency-Key': 'k-1',
    });
    expect(
      await idempotencyHeaders.with(async () => [['b', '2']] as [string, string][])(input),
    ).toEqual({ b: '2', 'Idempotency-Key': 'k-1' });
  });

  it('.with: the operation’s key wins over a same-named app header, in any letter case', async () => {
    const merged = await idempotencyHeaders.with({ 'idempotency-key': 'stale', keep: 'me' })({
      op: op('fresh'),
    });
    expect(merged).toEqual({ keep: 'me', 'Idempotency-Key': 'fresh' });
    // Without a key on the operation, the app's own header is left alone.
    expect(await idempotencyHeaders.with({ 'idempotency-key': 'manual' })({ op: op() })).toEqual({
      'idempotency-key': 'manual',
    });
  });

  it('.with passes the callback the same input httpLink / httpBatchLink gave', async () => {
    const seen: unknown[] = [];
    const batch = { opList: [op('k')] };
    await idempotencyHeaders.with((input) => {
      seen.push(input);
      return {};
    })(batch);
    expect(seen).toEqual([batch]);
  });

  it('fits the `headers` option of httpLink and httpBatchLink (types)', () => {
    type HttpHeadersOption = NonNullable<Parameters<typeof httpLink>[0]['headers']>;
    type BatchHeadersOption = NonNullable<Parameters<typeof httpBatchLink>[0]['headers']>;
    expectTypeOf(idempotencyHeaders).toExtend<HttpHeadersOption>();
    expectTypeOf(idempotencyHeaders).toExtend<BatchHeadersOption>();
    expectTypeOf(idempotencyHeaders.with({ a: 'b' })).toExtend<HttpHeadersOption>();
    expectTypeOf(idempotencyHeaders.with({ a: 'b' })).toExtend<BatchHeadersOption>();
    expectTypeOf(
      idempotencyHeaders.with(({ op }: { op: Operation }) => ({ path: op.path })),
    ).toExtend<HttpHeadersOption>();
  });
});

describe('idempotencyHeaders on the wire', () => {
  function capturingFetch() {
    const requests: { url: string; headers: Headers }[] = [];
    const fetch = async (url: string | URL | Request, init?: { headers?: HeadersInit }) => {
      requests.push({ url: String(url), headers: new Headers(init?.headers) });
      const body = String(url).includes('batch=1')
        ? JSON.stringify(
            decodeURIComponent(String(url).split('/trpc/')[1]?.split('?')[0] ?? '')
              .split(',')
              .map(() => ({ result: { data: 'ok' } })),
          )
        : JSON.stringify({ result: { data: 'ok' } });
      return new Response(body, { headers: { 'content-type': 'application/json' } });
    };
    return { fetch, requests };
  }

  it('httpLink sends the mutation’s key as Idempotency-Key', async () => {
    const { fetch, requests } = capturingFetch();
    const client = createTRPCUntypedClient({
      links: [
        idempotencyLink(),
        httpLink({ url: 'http://idem.test/trpc', fetch, headers: idempotencyHeaders }),
      ],
    });
    await client.mutation('order.place', {}, { context: { idempotencyKey: 'wire-1' } });
    await client.query('order.get', {});
    expect(requests[0]?.headers.get('idempotency-key')).toBe('wire-1');
    expect(requests[0]?.headers.get('idempotency-key-batch')).toBeNull();
    expect(requests[1]?.headers.get('idempotency-key')).toBeNull();
  });

  it('httpBatchLink sends Idempotency-Key-Batch keyed by batch index', async () => {
    const { fetch, requests } = capturingFetch();
    const client = createTRPCUntypedClient({
      links: [
        idempotencyLink(),
        httpBatchLink({
          url: 'http://idem.test/trpc',
          fetch,
          headers: idempotencyHeaders.with({ authorization: 'Bearer t' }),
        }),
      ],
    });
    await Promise.all([
      client.mutation('order.place', {}, { context: { idempotencyKey: 'batch-a' } }),
      client.mutation('order.note', {}, { context: { idempotencyKey: 'batch-b' } }),
    ]);
    expect(requests).toHaveLength(1);
    expect(requests[0]?.url).toContain('order.place,order.note?batch=1');
    expect(requests[0]?.headers.get('authorization')).toBe('Bearer t');
    expect(JSON.parse(requests[0]?.headers.get('idempotency-key-batch') ?? '')).toEqual({
      0: 'batch-a',
      1: 'batch-b',
    });
    expect(requests[0]?.headers.get('idempotency-key')).toBeNull();
  });
});
