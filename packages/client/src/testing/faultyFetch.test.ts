import type { httpBatchLink, httpLink } from '@trpc/client';
import { afterEach, describe, expect, expectTypeOf, it, vi } from 'vitest';
import { type FaultyFetchOptions, faultyFetch } from './faultyFetch.js';

// faultyFetch on its own; under idem's links: faultyFetch.links.test.ts.

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
