import {
  createTRPCUntypedClient,
  httpBatchLink,
  httpLink,
  type TRPCUntypedClient,
} from '@trpc/client';
import type { AnyRouter } from '@trpc/server';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { idempotencyHeaders } from '../idempotencyHeaders.js';
import { idempotencyLink } from '../links/idempotencyLink.js';
import { keyedRetryLink } from '../links/keyedRetryLink.js';
import { type FaultyFetchOptions, faultyFetch } from './faultyFetch.js';

afterEach(() => {
  vi.useRealTimers();
  vi.unstubAllGlobals();
});

describe('faultyFetch under the links (a unit-sized version of the integration test)', () => {
  /**
   * A fake tRPC server that runs each idempotency key once and replays it afterwards;
   * `effects` counts real executions. Answers single and batch requests.
   */
  function dedupingServer() {
    const done = new Map<string, number>();
    let effects = 0;
    const run = (key: string | undefined) => {
      if (key === undefined) return ++effects;
      const stored = done.get(key);
      if (stored !== undefined) return stored;
      effects += 1;
      done.set(key, effects);
      return effects;
    };
    const fetch = async (input: string | URL | Request, init?: RequestInit) => {
      const headers = new Headers(init?.headers);
      const url = String(input);
      if (url.includes('batch=1')) {
        const keys = JSON.parse(headers.get('idempotency-key-batch') ?? '{}') as Record<
          string,
          string
        >;
        const paths = url.split('/trpc/')[1]?.split('?')[0]?.split(',') ?? [];
        const body = paths.map((_path, index) => ({ result: { data: run(keys[index]) } }));
        return Response.json(body);
      }
      return Response.json({ result: { data: run(headers.get('idempotency-key') ?? undefined) } });
    };
    return {
      fetch,
      get effects() {
        return effects;
      },
    };
  }

  /** A deduping server behind a faultyFetch with these faults, drawn from seed 2026. */
  function faultyServer(faults: Omit<FaultyFetchOptions, 'fetch' | 'seed'>) {
    const server = dedupingServer();
    return { server, fetch: faultyFetch({ ...faults, seed: 2026, fetch: server.fetch }) };
  }

  /**
   * Places `count` orders (mutations of `order.place`) at once, runs every timer, and
   * settles each call into its value or its error.
   */
  async function placeOrders(client: TRPCUntypedClient<AnyRouter>, count: number) {
    const results = Array.from({ length: count }, (_, index) =>
      client.mutation('order.place', { index }).then(
        (value) => ({ ok: true, value }),
        (error: unknown) => ({ ok: false, error }),
      ),
    );
    await vi.runAllTimersAsync();
    return Promise.all(results);
  }

  it.each(['httpLink', 'httpBatchLink'] as const)(
    '%s: 200 keyed mutations, 30 percent of responses dropped and 10 percent failed before send, run exactly 200 times',
    async (terminating) => {
      vi.useFakeTimers();
      const { server, fetch } = faultyServer({ dropResponseRate: 0.3, failBeforeSendRate: 0.1 });
      const http = { url: 'http://idem.test/trpc', fetch, headers: idempotencyHeaders };
      const client = createTRPCUntypedClient({
        links: [
          idempotencyLink(),
          keyedRetryLink({ maxAttempts: 12, budget: false, random: () => 0.5 }),
          terminating === 'httpLink' ? httpLink(http) : httpBatchLink({ ...http, maxItems: 5 }),
        ],
      });
      const settled = await placeOrders(client, 200);
      expect(settled.every((result) => result.ok)).toBe(true);
      expect(server.effects).toBe(200);
      expect(fetch.counters.dropped).toBeGreaterThan(0);
      expect(fetch.counters.failedBeforeSend).toBeGreaterThan(0);
    },
  );

  it('hung replies: attemptTimeoutMs aborts each one (its fetch ends) and the retry replays', async () => {
    vi.useFakeTimers();
    const { server, fetch: faulty } = faultyServer({ dropResponseRate: 0.1, hangRate: 0.2 });
    let fetchesPending = 0;
    const fetch: typeof faulty = Object.assign(
      (input: string | URL | Request, init?: Parameters<typeof faulty>[1]) => {
        fetchesPending += 1;
        return faulty(input, init).finally(() => {
          fetchesPending -= 1;
        });
      },
      { counters: faulty.counters },
    );
    const client = createTRPCUntypedClient({
      links: [
        idempotencyLink(),
        keyedRetryLink({ maxAttempts: 12, budget: false, attemptTimeoutMs: 2_000 }),
        httpLink({ url: 'http://idem.test/trpc', fetch, headers: idempotencyHeaders }),
      ],
    });
    const settled = await placeOrders(client, 100);
    expect(settled.find((result) => !result.ok)).toBeUndefined();
    expect(server.effects).toBe(100);
    expect(faulty.counters.hung).toBeGreaterThan(10);
    expect(fetchesPending).toBe(0);
  });

  it('the same workload without keys runs more than once per call (why keys exist)', async () => {
    vi.useFakeTimers();
    const { server, fetch } = faultyServer({ dropResponseRate: 0.3, failBeforeSendRate: 0.1 });
    // Retrying every failure of an unkeyed mutation, as a naive retry link would.
    const { retryLink } = await import('@trpc/client');
    const client = createTRPCUntypedClient({
      links: [
        retryLink({ retry: ({ attempts }) => attempts < 12 }),
        httpLink({ url: 'http://idem.test/trpc', fetch }),
      ],
    });
    await placeOrders(client, 200);
    expect(server.effects).toBeGreaterThan(200);
    expect(server.effects - 200).toBe(fetch.counters.dropped);
  });
});
