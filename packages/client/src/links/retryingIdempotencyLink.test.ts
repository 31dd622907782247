import type { AddressInfo } from 'node:net';
import { ConfigurationError } from '@idem/core';
import {
  createTRPCClient,
  createTRPCUntypedClient,
  httpBatchLink,
  httpLink,
  TRPCClientError,
} from '@trpc/client';
import { initTRPC, TRPCError } from '@trpc/server';
import { createHTTPServer } from '@trpc/server/adapters/standalone';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { scriptedLink } from '../../test/scriptedLink.js';
import { idempotencyHeaders } from '../idempotencyHeaders.js';
import { faultyFetch } from '../testing/faultyFetch.js';
import type { RetryEvent } from './KeyedRetryLinkOptions.js';
import { retryingIdempotencyLink } from './retryingIdempotencyLink.js';

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('retryingIdempotencyLink', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => {
    vi.useRealTimers();
    vi.restoreAllMocks();
  });

  it('keys every mutation: a fresh UUID per call, the caller’s key, or keyFor’s', async () => {
    const server = scriptedLink([{ data: 'ok' }]);
    const client = createTRPCUntypedClient({
      links: [
        retryingIdempotencyLink({
          keyFor: (op) =>
            op.path === 'cart.checkout' ? `checkout:${String(op.input)}` : undefined,
        }),
        server.link,
      ],
    });
    await client.mutation('order.place', {});
    await client.mutation('order.place', {});
    await client.mutation('order.place', {}, { context: { idempotencyKey: 'mine-1' } });
    await client.mutation('cart.checkout', 'cart-7');

    const keys = server.calls.map((op) => op.context.idempotencyKey);
    expect(keys[0]).toMatch(UUID_V4);
    expect(keys[1]).toMatch(UUID_V4);
    expect(keys[0]).not.toBe(keys[1]);
    expect(keys.slice(2)).toEqual(['mine-1', 'checkout:cart-7']);
  });

  it('retries a mutation with the same key on every attempt', async () => {
    const server = scriptedLink([{ status: 503 }, { networkError: true }, { data: 'placed' }]);
    const retries: RetryEvent[] = [];
    const client = createTRPCUntypedClient({
      links: [
        retryingIdempotencyLink({ random: () => 0.5, onRetry: (event) => retries.push(event) }),
        server.link,
      ],
    });
    const result = client.mutation('order.place', {});
    await vi.runAllTimersAsync();

    expect(await result).toBe('placed');
    const keys = server.calls.map((op) => op.context.idempotencyKey);
    expect(keys).toHaveLength(3);
    expect(keys[0]).toMatch(UUID_V4);
    expect(new Set(keys).size).toBe(1);
    expect(retries.map((retry) => retry.attempt)).toEqual([1, 2]);
  });

  it('leaves queries and subscriptions without a key (a failed query is retried, as reads are safe)', async () => {
    const server = scriptedLink([{ status: 503 }, { data: 42 }]);
    const client = createTRPCUntypedClient({
      links: [retryingIdempotencyLink({ random: () => 0.5 }), server.link],
    });
    const result = client.query('stock.get', { sku: 'tea' });
    await vi.runAllTimersAsync();
    expect(await result).toBe(42);
    client.subscription('order.events', undefined, {}).unsubscribe();

    expect(server.calls.map((op) => [op.type, op.context.idempotencyKey])).toEqual([
      ['query', undefined],
      ['query', undefined],
      ['subscription', undefined],
    ]);
    expect(server.calls[0]?.input).toEqual({ sku: 'tea' });
  });

  it('passes the retry options on: maxAttempts 1 sends once, and a definitive error is not retried', async () => {
    const once = scriptedLink([{ status: 503 }, { data: 'never' }]);
    const noRetries = createTRPCUntypedClient({
      links: [retryingIdempotencyLink({ maxAttempts: 1 }), once.link],
    });
    await expect(noRetries.mutation('order.place', {})).rejects.toBeInstanceOf(TRPCClientError);
    expect(once.calls).toHaveLength(1);

    const refused = scriptedLink([{ status: 422 }, { data: 'never' }]);
    const client = createTRPCUntypedClient({
      links: [retryingIdempotencyLink(), refused.link],
    });
    await expect(client.mutation('order.place', {})).rejects.toBeInstanceOf(TRPCClientError);
    expect(refused.calls).toHaveLength(1);
  });

  it('rejects invalid retry options when it is made, naming itself, not keyedRetryLink', () => {
    expect(() => retryingIdempotencyLink({ maxAttempts: 0 })).toThrow(ConfigurationError);
    expect(() => retryingIdempotencyLink({ baseDelayMs: -1 })).toThrow(
      /^retryingIdempotencyLink: baseDelayMs must be/,
    );
  });

  it('never meets an unkeyed mutation, so it never warns about one', async () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    const server = scriptedLink([{ status: 503 }, { data: 'ok' }]);
    const client = createTRPCUntypedClient({
      links: [retryingIdempotencyLink({ random: () => 0.5 }), server.link],
    });
    const result = client.mutation('order.place', {});
    await vi.runAllTimersAsync();
    expect(await result).toBe('ok');
    expect(server.calls).toHaveLength(2);
    expect(warn).not.toHaveBeenCalled();
  });
});

describe('retryingIdempotencyLink end to end, over real HTTP', () => {
  /**
   * A tRPC server on a real socket that runs each idempotency key once and replays the
   * first result to later requests with that key (a stand-in for @idem/server's
   * middleware), counting executions and mutations that arrived without a key.
   */
  const executions = new Map<string, number>();
  let unkeyedMutations = 0;
  let keyedQueries = 0;
  let runs = 0;

  const t = initTRPC.context<{ keyOf: (batchIndex: number) => string | undefined }>().create();
  const once = t.middleware(async ({ ctx, batchIndex, next }) => {
    const key = ctx.keyOf(batchIndex);
    if (key === undefined) {
      unkeyedMutations += 1;
      throw new TRPCError({ code: 'BAD_REQUEST', message: 'no idempotency key' });
    }
    const stored = executions.get(key);
    if (stored !== undefined) return next({ ctx: { run: stored } });
    runs += 1;
    executions.set(key, runs);
    return next({ ctx: { run: runs } });
  });
  const appRouter = t.router({
    placeOrder: t.procedure
      .use(once)
      .input((value) => value as { sku: string })
      .mutation(({ ctx, input }) => `order-${ctx.run}-${input.sku}`),
    stock: t.procedure.query(({ ctx }) => {
      if (ctx.keyOf(0) !== undefined) keyedQueries += 1;
      return 7;
    }),
  });

  const server = createHTTPServer({
    router: appRouter,
    createContext: ({ req }) => {
      const single = req.headers['idempotency-key'];
      const batch = req.headers['idempotency-key-batch'];
      const batchKeys: Record<string, string> =
        typeof batch === 'string' ? (JSON.parse(batch) as Record<string, string>) : {};
      return {
        keyOf: (batchIndex: number) =>
          typeof single === 'string' ? single : batchKeys[String(batchIndex)],
      };
    },
  });
  let url = '';

  beforeAll(async () => {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve, reject) =>
      server.close((error) => (error ? reject(error) : resolve())),
    );
  });
  beforeEach(() => {
    executions.clear();
    unkeyedMutations = 0;
    keyedQueries = 0;
    runs = 0;
  });

  it.each(['httpLink', 'httpBatchLink'] as const)(
    '%s: 40 mutations, 30 percent of replies lost after the server ran them, each run exactly once',
    async (terminating) => {
      const fetch = faultyFetch({ dropResponseRate: 0.3, seed: 14 });
      const http = { url, fetch, headers: idempotencyHeaders };
      const client = createTRPCClient<typeof appRouter>({
        links: [
          retryingIdempotencyLink({ baseDelayMs: 1, maxAttempts: 20, budget: false }),
          terminating === 'httpLink' ? httpLink(http) : httpBatchLink({ ...http, maxItems: 5 }),
        ],
      });

      const results = await Promise.all(
        Array.from({ length: 40 }, (_, index) => client.placeOrder.mutate({ sku: `sku-${index}` })),
      );
      expect(await client.stock.query()).toBe(7);

      expect(runs).toBe(40);
      expect(executions.size).toBe(40);
      expect(new Set(results).size).toBe(40);
      expect(results.map((result) => result.replace(/^order-\d+-/, ''))).toEqual(
        Array.from({ length: 40 }, (_, index) => `sku-${index}`),
      );
      expect(fetch.counters.dropped).toBeGreaterThan(0);
      expect(unkeyedMutations).toBe(0);
      expect(keyedQueries).toBe(0);
    },
  );
});
