import { createTRPCUntypedClient, httpBatchLink, httpLink } from '@trpc/client';
import { afterEach, describe, expect, expectTypeOf, it, vi } from 'vitest';
import { idempotencyHeaders } from '../idempotencyHeaders.js';
import { idempotencyLink } from '../links/idempotencyLink.js';
import { keyedRetryLink } from '../links/keyedRetryLink.js';
import { type FaultyFetchOptions, faultyFetch } from './faultyFetch.js';

/** A fake server: counts requests and reports when a response body was read to the end. */
function countingServer() {
  const state = { received: 0, bodiesRead: 0 };
  const fetch = vi.fn(async (_input: string | URL | Request, _init?: RequestInit) => {
    state.received += 1;
    const chunks = [
      new TextEncoder().encode('{"result":'),
      new TextEncoder().encode('{"data":1}}'),
    ];
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        const chunk = chunks.shift();
        if (chunk) return controller.enqueue(chunk);
        state.bodiesRead += 1;
        controller.close();
      },
    });
    return new Response(body, { headers: { 'content-type': 'application/json' } });
  });
  return { fetch, state };
}

type Outcome = 'ok' | 'dropped' | 'failedBeforeSend';

async function outcomes(options: FaultyFetchOptions, calls: number): Promise<Outcome[]> {
  const server = countingServer();
  const fetch = faultyFetch({ ...options, fetch: server.fetch });
  const seen: Outcome[] = [];
  for (let index = 0; index < calls; index++) {
    const before = fetch.counters;
    try {
      await (await fetch('http://idem.test/x')).text();
      seen.push('ok');
    } catch {
      seen.push(fetch.counters.dropped > before.dropped ? 'dropped' : 'failedBeforeSend');
    }
  }
  return seen;
}

afterEach(() => {
  vi.useRealTimers();
  vi.unstubAllGlobals();
});

describe('faultyFetch', () => {
  it('is deterministic: the same seed gives the same faults, another seed others', async () => {
    const options = { dropResponseRate: 0.3, failBeforeSendRate: 0.1 };
    const first = await outcomes({ ...options, seed: 42 }, 200);
    const again = await outcomes({ ...options, seed: 42 }, 200);
    const other = await outcomes({ ...options, seed: 43 }, 200);
    expect(again).toEqual(first);
    expect(other).not.toEqual(first);
    expect(first).toContain('ok');
    expect(first).toContain('dropped');
    expect(first).toContain('failedBeforeSend');
  });

  it('faults at about the configured rates', async () => {
    const seen = await outcomes({ dropResponseRate: 0.3, failBeforeSendRate: 0.1, seed: 7 }, 2_000);
    const failedBeforeSend = seen.filter((outcome) => outcome === 'failedBeforeSend').length;
    const dropped = seen.filter((outcome) => outcome === 'dropped').length;
    expect(failedBeforeSend / 2_000).toBeCloseTo(0.1, 1);
    expect(dropped / (2_000 - failedBeforeSend)).toBeCloseTo(0.3, 1);
  });

  it('"drop response" really sent the request and read the whole response before failing', async () => {
    const server = countingServer();
    const fetch = faultyFetch({ dropResponseRate: 1, fetch: server.fetch });
    const error = await fetch('http://idem.test/x', { method: 'POST', body: '{}' }).catch(
      (thrown: unknown) => thrown,
    );
    expect(error).toBeInstanceOf(TypeError);
    expect((error as TypeError).message).toBe('fetch failed');
    expect(((error as TypeError).cause as Error).message).toMatch(
      /dropped after the server processed/,
    );
    expect(server.fetch).toHaveBeenCalledWith('http://idem.test/x', { method: 'POST', body: '{}' });
    expect(server.state).toEqual({ received: 1, bodiesRead: 1 });
    expect(fetch.counters).toEqual({ sent: 1, dropped: 1, failedBeforeSend: 0, hung: 0 });
  });

  it('"fail before send" never reaches the server', async () => {
    const server = countingServer();
    const fetch = faultyFetch({ failBeforeSendRate: 1, fetch: server.fetch });
    await expect(fetch('http://idem.test/x')).rejects.toThrow(TypeError);
    expect(server.fetch).not.toHaveBeenCalled();
    expect(fetch.counters).toEqual({ sent: 0, dropped: 0, failedBeforeSend: 1, hung: 0 });
  });

  it('passes responses through untouched when no fault is drawn', async () => {
    const server = countingServer();
    const fetch = faultyFetch({ fetch: server.fetch });
    const response = await fetch('http://idem.test/x');
    expect(await response.json()).toEqual({ result: { data: 1 } });
    expect(fetch.counters).toEqual({ sent: 1, dropped: 0, failedBeforeSend: 0, hung: 0 });
  });

  it('uses the global fetch when none is given, looked up at call time', async () => {
    const server = countingServer();
    const fetch = faultyFetch();
    vi.stubGlobal('fetch', server.fetch);
    await fetch('http://idem.test/x');
    expect(server.state.received).toBe(1);
  });

  it('delays before sending, a fixed time or a seeded draw from a range', async () => {
    vi.useFakeTimers();
    const server = countingServer();
    const fixed = faultyFetch({ delayMs: 1_000, fetch: server.fetch });
    const pending = fixed('http://idem.test/x');
    await vi.advanceTimersByTimeAsync(999);
    expect(server.state.received).toBe(0);
    await vi.advanceTimersByTimeAsync(1);
    await pending;
    expect(server.state.received).toBe(1);

    const ranged = faultyFetch({ delayMs: [100, 200], seed: 3, fetch: server.fetch });
    const started = Date.now();
    const second = ranged('http://idem.test/x');
    await vi.advanceTimersByTimeAsync(99);
    expect(server.state.received).toBe(1);
    await vi.runAllTimersAsync();
    await second;
    expect(Date.now() - started).toBeLessThanOrEqual(200);
    expect(server.state.received).toBe(2);
  });

  it('an abort during the delay rejects at once, without sending', async () => {
    vi.useFakeTimers();
    const server = countingServer();
    const fetch = faultyFetch({ delayMs: 10_000, fetch: server.fetch });
    const controller = new AbortController();
    const pending = fetch('http://idem.test/x', { signal: controller.signal }).catch(
      (error: unknown) => error,
    );
    controller.abort();
    expect(((await pending) as Error).name).toBe('AbortError');
    expect(vi.getTimerCount()).toBe(0);
    expect(server.fetch).not.toHaveBeenCalled();
  });

  it('"hang" sends, lets the server finish, then waits until the signal aborts', async () => {
    const server = countingServer();
    const fetch = faultyFetch({ hangRate: 1, fetch: server.fetch });
    const controller = new AbortController();
    let settled = false;
    const pending = fetch('http://idem.test/x', { signal: controller.signal }).then(
      () => expect.unreachable(),
      (error: unknown) => {
        settled = true;
        return error;
      },
    );
    await vi.waitFor(() => expect(server.state).toEqual({ received: 1, bodiesRead: 1 }));
    // Nothing settles it but the abort: give every pending callback a few turns first.
    for (let turn = 0; turn < 10; turn++) await new Promise((resolve) => setImmediate(resolve));
    expect(settled).toBe(false);
    controller.abort(new DOMException('gave up', 'TimeoutError'));
    expect(((await pending) as Error).name).toBe('TimeoutError');
    expect(fetch.counters).toEqual({ sent: 1, dropped: 0, failedBeforeSend: 0, hung: 1 });
  });

  it('hangRate takes its share of the drop draw, so a seed drops the same requests with or without it', async () => {
    const withoutHangs = await outcomes({ dropResponseRate: 0.3, seed: 5 }, 200);
    const server = countingServer();
    const fetch = faultyFetch({
      dropResponseRate: 0.3,
      hangRate: 0.2,
      seed: 5,
      fetch: server.fetch,
    });
    const withHangs: string[] = [];
    for (let index = 0; index < 200; index++) {
      const controller = new AbortController();
      const before = fetch.counters;
      let settled = false;
      const call = fetch('http://idem.test/x', { signal: controller.signal }).then(
        () => 'ok',
        () => (fetch.counters.dropped > before.dropped ? 'dropped' : 'hung'),
      );
      void call.then(() => {
        settled = true;
      });
      // A hung call stays pending once counted; abort it to move on.
      await vi.waitFor(() => expect(settled || fetch.counters.hung > before.hung).toBe(true), {
        interval: 1,
        timeout: 10_000,
      });
      if (!settled) controller.abort();
      withHangs.push(await call);
    }
    expect(withHangs.map((outcome) => (outcome === 'dropped' ? 'dropped' : 'ok'))).toEqual(
      withoutHangs.map((outcome) => (outcome === 'dropped' ? 'dropped' : 'ok')),
    );
    expect(withHangs.filter((outcome) => outcome === 'hung').length / 200).toBeCloseTo(0.2, 1);
  });

  it('refuses rates outside [0, 1] and bad delays', () => {
    expect(() => faultyFetch({ dropResponseRate: 1.5 })).toThrow(RangeError);
    expect(() => faultyFetch({ failBeforeSendRate: -0.1 })).toThrow(RangeError);
    expect(() => faultyFetch({ dropResponseRate: Number.NaN })).toThrow(RangeError);
    expect(() => faultyFetch({ hangRate: 2 })).toThrow(RangeError);
    expect(() => faultyFetch({ dropResponseRate: 0.6, hangRate: 0.5 })).toThrow(/at most 1/);
    expect(() => faultyFetch({ delayMs: -1 })).toThrow(RangeError);
    expect(() => faultyFetch({ delayMs: [200, 100] })).toThrow(RangeError);
  });

  it('fits the fetch option of httpLink and httpBatchLink (types)', () => {
    type LinkFetch = NonNullable<Parameters<typeof httpLink>[0]['fetch']>;
    type BatchFetch = NonNullable<Parameters<typeof httpBatchLink>[0]['fetch']>;
    expectTypeOf(faultyFetch()).toExtend<LinkFetch>();
    expectTypeOf(faultyFetch()).toExtend<BatchFetch>();
    expectTypeOf(faultyFetch).parameter(0).exclude<undefined>().toHaveProperty('fetch');
    expectTypeOf<typeof fetch>().toExtend<NonNullable<FaultyFetchOptions['fetch']>>();
  });
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

  it.each(['httpLink', 'httpBatchLink'] as const)(
    '%s: 200 keyed mutations, 30 percent of responses dropped and 10 percent failed before send, run exactly 200 times',
    async (terminating) => {
      vi.useFakeTimers();
      const server = dedupingServer();
      const fetch = faultyFetch({
        dropResponseRate: 0.3,
        failBeforeSendRate: 0.1,
        seed: 2026,
        fetch: server.fetch,
      });
      const http = { url: 'http://idem.test/trpc', fetch, headers: idempotencyHeaders };
      const client = createTRPCUntypedClient({
        links: [
          idempotencyLink(),
          keyedRetryLink({ maxAttempts: 12, budget: false, random: () => 0.5 }),
          terminating === 'httpLink' ? httpLink(http) : httpBatchLink({ ...http, maxItems: 5 }),
        ],
      });
      const results = Array.from({ length: 200 }, (_, index) =>
        client.mutation('order.place', { index }).then(
          (value) => ({ ok: true, value }),
          (error: unknown) => ({ ok: false, error }),
        ),
      );
      await vi.runAllTimersAsync();
      const settled = await Promise.all(results);
      expect(settled.every((result) => result.ok)).toBe(true);
      expect(server.effects).toBe(200);
      expect(fetch.counters.dropped).toBeGreaterThan(0);
      expect(fetch.counters.failedBeforeSend).toBeGreaterThan(0);
    },
  );

  it('hung replies: attemptTimeoutMs aborts each one (its fetch ends) and the retry replays', async () => {
    vi.useFakeTimers();
    const server = dedupingServer();
    const faulty = faultyFetch({
      dropResponseRate: 0.1,
      hangRate: 0.2,
      seed: 2026,
      fetch: server.fetch,
    });
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
    const results = Array.from({ length: 100 }, (_, index) =>
      client.mutation('order.place', { index }).then(
        (value) => ({ ok: true, value }),
        (error: unknown) => ({ ok: false, error }),
      ),
    );
    await vi.runAllTimersAsync();
    const settled = await Promise.all(results);
    expect(settled.find((result) => !result.ok)).toBeUndefined();
    expect(server.effects).toBe(100);
    expect(faulty.counters.hung).toBeGreaterThan(10);
    expect(fetchesPending).toBe(0);
  });

  it('the same workload without keys runs more than once per call (why keys exist)', async () => {
    vi.useFakeTimers();
    const server = dedupingServer();
    const fetch = faultyFetch({
      dropResponseRate: 0.3,
      failBeforeSendRate: 0.1,
      seed: 2026,
      fetch: server.fetch,
    });
    // Retrying every failure of an unkeyed mutation, as a naive retry link would.
    const { retryLink } = await import('@trpc/client');
    const client = createTRPCUntypedClient({
      links: [
        retryLink({ retry: ({ attempts }) => attempts < 12 }),
        httpLink({ url: 'http://idem.test/trpc', fetch }),
      ],
    });
    const results = Array.from({ length: 200 }, (_, index) =>
      client.mutation('order.place', { index }).catch(() => undefined),
    );
    await vi.runAllTimersAsync();
    await Promise.all(results);
    expect(server.effects).toBeGreaterThan(200);
    expect(server.effects - 200).toBe(fetch.counters.dropped);
  });
});
