import { ConfigurationError, isRetryBudgetExhaustedError, RetryBudget } from '@idem/core';
import { seededRandom } from '@idem/core/testing';
import { createTRPCUntypedClient, TRPCClientError, type TRPCLink } from '@trpc/client';
import type { AnyRouter } from '@trpc/server';
import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { scriptedLink } from '../../test/scriptedLink.js';
import { classifyError } from '../classifyError.js';
import { isOutcomeUnknown } from '../isOutcomeUnknown.js';
import { idempotencyLink } from './idempotencyLink.js';
import type { KeyedRetryLinkOptions, RetryEvent } from './KeyedRetryLinkOptions.js';
import { keyedRetryLink } from './keyedRetryLink.js';

/** Settles a promise into a value, so a rejection is never unhandled while timers run. */
async function settle<T>(
  promise: Promise<T>,
): Promise<{ ok: true; value: T } | { ok: false; error: unknown }> {
  return promise.then(
    (value) => ({ ok: true as const, value }),
    (error: unknown) => ({ ok: false as const, error }),
  );
}

function setup(replies: Parameters<typeof scriptedLink>[0], options: KeyedRetryLinkOptions = {}) {
  const server = scriptedLink(replies);
  const retries: RetryEvent[] = [];
  const client = createTRPCUntypedClient({
    links: [
      keyedRetryLink({
        random: () => 0.5,
        ...options,
        onRetry: (event) => {
          retries.push(event);
          options.onRetry?.(event);
        },
      }),
      server.link,
    ],
  });
  return { client, server, retries };
}

const KEYED = { context: { idempotencyKey: 'key-1' } };

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
  vi.unstubAllEnvs();
});

describe('keyedRetryLink: what is retried', () => {
  it('retries a query until it succeeds and returns its data', async () => {
    const { client, server, retries } = setup([
      { status: 503 },
      { networkError: true },
      { data: 42 },
    ]);
    const result = settle(client.query('stock.get'));
    await vi.runAllTimersAsync();
    expect(await result).toEqual({ ok: true, value: 42 });
    expect(server.calls).toHaveLength(3);
    expect(retries.map((retry) => retry.attempt)).toEqual([1, 2]);
  });

  it('retries a keyed mutation, and every attempt carries the same key', async () => {
    const server = scriptedLink([{ networkError: true }, { status: 503 }, { data: 'ok' }]);
    const client = createTRPCUntypedClient({
      links: [idempotencyLink(), keyedRetryLink({ random: () => 0.5 }), server.link],
    });
    const result = settle(client.mutation('order.place', { sku: 'tea' }));
    await vi.runAllTimersAsync();
    expect(await result).toEqual({ ok: true, value: 'ok' });
    const keys = server.calls.map((op) => op.context.idempotencyKey);
    expect(keys).toHaveLength(3);
    expect(new Set(keys).size).toBe(1);
    expect(keys[0]).toMatch(
      /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
    );
  });

  it('never retries an unkeyed mutation, and warns once per link instance', async () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    const { client, server } = setup([{ status: 503 }]);
    const first = settle(client.mutation('order.place', {}));
    const second = settle(client.mutation('order.cancel', {}));
    await vi.runAllTimersAsync();
    expect((await first).ok).toBe(false);
    expect((await second).ok).toBe(false);
    expect(server.calls).toHaveLength(2);
    expect(warn).toHaveBeenCalledTimes(1);
    expect(warn.mock.calls[0]?.[0]).toMatch(
      /"order\.place" has no idempotency key.*retryingIdempotencyLink\(\).*idempotencyLink\(\)/,
    );

    // A second link instance warns on its own.
    const other = setup([{ status: 503 }]);
    await settle(other.client.mutation('order.place', {}));
    expect(warn).toHaveBeenCalledTimes(2);
  });

  it('does not warn in production', async () => {
    vi.stubEnv('NODE_ENV', 'production');
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    const { client } = setup([{ status: 503 }]);
    await settle(client.mutation('order.place', {}));
    expect(warn).not.toHaveBeenCalled();
  });

  it.each([408, 425, 429, 500, 502, 503, 504])('retries HTTP %i', async (status) => {
    const { client, server } = setup([{ status }, { data: 'ok' }]);
    const result = settle(client.mutation('order.place', {}, KEYED));
    await vi.runAllTimersAsync();
    expect(await result).toEqual({ ok: true, value: 'ok' });
    expect(server.calls).toHaveLength(2);
  });

  it.each([400, 401, 403, 404, 422])('never retries HTTP %i', async (status) => {
    const { client, server } = setup([{ status }, { data: 'ok' }]);
    const result = await settle(client.mutation('order.place', {}, KEYED));
    expect(result.ok).toBe(false);
    expect(server.calls).toHaveLength(1);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('retries a 409 only when it is idem’s busy-key answer (in progress or lease lost)', async () => {
    const viaData = setup([
      { status: 409, idempotency: { code: 'REQUEST_IN_PROGRESS', retryAfterMs: 1_000 } },
      { data: 'replayed' },
    ]);
    const viaHeader = setup([
      { status: 409, headers: { 'Idempotency-Status': 'in-progress', 'Retry-After': '1' } },
      { data: 'replayed' },
    ]);
    const leaseLost = setup([
      { status: 409, idempotency: { code: 'LEASE_LOST', retryAfterMs: 0 } },
      { data: 'replayed' },
    ]);
    const otherConflict = setup([{ status: 409 }, { data: 'never' }]);

    const results = [viaData, viaHeader, leaseLost, otherConflict].map(({ client }) =>
      settle(client.mutation('order.place', {}, KEYED)),
    );
    await vi.runAllTimersAsync();
    expect(await results[0]).toEqual({ ok: true, value: 'replayed' });
    expect(await results[1]).toEqual({ ok: true, value: 'replayed' });
    expect(await results[2]).toEqual({ ok: true, value: 'replayed' });
    expect((await results[3])?.ok).toBe(false);
    expect(otherConflict.server.calls).toHaveLength(1);
  });

  it('reads the status from data.code when a formatter dropped data.httpStatus', async () => {
    const retried = setup([{ status: 503, omitHttpStatus: true }, { data: 'ok' }]);
    const refused = setup([{ status: 404, omitHttpStatus: true }, { data: 'never' }]);
    const results = [retried, refused].map(({ client }) => settle(client.query('x')));
    await vi.runAllTimersAsync();
    expect((await results[0])?.ok).toBe(true);
    expect(refused.server.calls).toHaveLength(1);
  });

  it('does not retry the error of a call whose signal was aborted', async () => {
    const controller = new AbortController();
    controller.abort();
    const { client, server } = setup([{ abortError: true }, { data: 'never' }]);
    const result = await settle(client.query('x', undefined, { signal: controller.signal }));
    expect(result.ok).toBe(false);
    expect(server.calls).toHaveLength(1);
  });

  it('passes subscriptions through untouched', () => {
    const server = scriptedLink([{ status: 503 }]);
    const client = createTRPCUntypedClient({ links: [keyedRetryLink(), server.link] });
    const errors: unknown[] = [];
    client.subscription('events', undefined, { onError: (error) => errors.push(error) });
    return vi.runAllTimersAsync().then(() => {
      expect(server.calls).toHaveLength(1);
      expect(errors).toHaveLength(1);
    });
  });
});

describe('keyedRetryLink: options', () => {
  it('stops after maxAttempts and fails with the last error', async () => {
    const { client, server } = setup([{ status: 503 }], { maxAttempts: 3 });
    const result = settle(client.query('x'));
    await vi.runAllTimersAsync();
    const settled = await result;
    expect(settled.ok).toBe(false);
    expect(server.calls).toHaveLength(3);
    if (!settled.ok)
      expect((settled.error as TRPCClientError<AnyRouter>).data?.httpStatus).toBe(503);
  });

  it('retryOn replaces the decision, but cannot make an unkeyed mutation retryable', async () => {
    vi.spyOn(console, 'warn').mockImplementation(() => {});
    const retryOn = vi.fn(() => true);
    const { client, server } = setup([{ status: 400 }, { data: 'ok' }, { status: 400 }], {
      retryOn,
    });
    const keyed = settle(client.mutation('x', {}, KEYED));
    await vi.runAllTimersAsync();
    expect(await keyed).toEqual({ ok: true, value: 'ok' });
    expect(retryOn).toHaveBeenCalledWith(
      expect.objectContaining({ attempt: 1, transient: false, error: expect.any(TRPCClientError) }),
    );

    const unkeyed = await settle(client.mutation('x', {}));
    expect(unkeyed.ok).toBe(false);
    expect(server.calls).toHaveLength(3);
  });

  it('a throwing retryOn fails the call with its error', async () => {
    const { client } = setup([{ status: 503 }], {
      retryOn: () => {
        throw new Error('retryOn broke');
      },
    });
    const result = await settle(client.query('x'));
    expect(result.ok).toBe(false);
    if (!result.ok) expect((result.error as Error).message).toBe('retryOn broke');
  });

  it('tells onRetry the op, the failed attempt, the delay and the error', async () => {
    const { client, retries } = setup([{ status: 503 }, { data: 1 }], {
      baseDelayMs: 1_000,
      random: () => 0.25,
    });
    const result = settle(client.query('stock.get'));
    await vi.runAllTimersAsync();
    await result;
    expect(retries).toHaveLength(1);
    expect(retries[0]?.op.path).toBe('stock.get');
    expect(retries[0]?.attempt).toBe(1);
    expect(retries[0]?.delayMs).toBe(250);
    expect(retries[0]?.error.data?.httpStatus).toBe(503);
  });

  it('refuses options that cannot work', () => {
    expect(() => keyedRetryLink({ maxAttempts: 0 })).toThrow(ConfigurationError);
    expect(() => keyedRetryLink({ maxAttempts: 2.5 })).toThrow(ConfigurationError);
    expect(() => keyedRetryLink({ baseDelayMs: -1 })).toThrow(ConfigurationError);
    expect(() => keyedRetryLink({ maxDelayMs: Number.NaN })).toThrow(ConfigurationError);
    expect(() => keyedRetryLink({ maxRetryAfterMs: 2 ** 31 })).toThrow(/longest timer/);
    expect(() => keyedRetryLink({ deadlineMs: 0 })).toThrow(ConfigurationError);
    expect(() => keyedRetryLink({ deadlineMs: Number.POSITIVE_INFINITY })).not.toThrow();
    for (const attemptTimeoutMs of [0, -1, Number.NaN, 2 ** 31]) {
      expect(() => keyedRetryLink({ attemptTimeoutMs })).toThrow(/attemptTimeoutMs/);
    }
    expect(() => keyedRetryLink({ attemptTimeoutMs: false })).not.toThrow();
    expect(() => keyedRetryLink({ attemptTimeoutMs: Number.POSITIVE_INFINITY })).not.toThrow();
  });
});

describe('keyedRetryLink: delays', () => {
  it('every delay lies in [0, min(maxDelayMs, baseDelayMs · 2^n)] (property)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: 1_000 }),
        fc.integer({ min: 0, max: 20_000 }),
        fc.integer({ min: 0, max: 2 ** 32 - 1 }),
        fc.integer({ min: 1, max: 12 }),
        async (baseDelayMs, maxDelayMs, seed, maxAttempts) => {
          const { client, retries } = setup([{ status: 503 }], {
            baseDelayMs,
            maxDelayMs,
            maxAttempts,
            random: seededRandom(seed),
            deadlineMs: Number.POSITIVE_INFINITY,
            budget: false,
          });
          const result = settle(client.query('x'));
          await vi.runAllTimersAsync();
          await result;
          expect(retries).toHaveLength(maxAttempts - 1);
          retries.forEach((retry, n) => {
            expect(retry.delayMs).toBeGreaterThanOrEqual(0);
            expect(retry.delayMs).toBeLessThanOrEqual(Math.min(maxDelayMs, baseDelayMs * 2 ** n));
          });
        },
      ),
      { numRuns: 100 },
    );
  });

  it('waits exactly the delay it reports before sending again', async () => {
    const { client, server, retries } = setup([{ status: 503 }, { data: 'ok' }], {
      baseDelayMs: 1_000,
      random: () => 0.5,
    });
    const result = settle(client.query('x'));
    await vi.advanceTimersByTimeAsync(0);
    expect(retries[0]?.delayMs).toBe(500);
    await vi.advanceTimersByTimeAsync(499);
    expect(server.calls).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(server.calls).toHaveLength(2);
    expect((await result).ok).toBe(true);
  });

  it.each([
    ['delay-seconds', '3', 3_000],
    ['an HTTP date', 'in 5 s', 5_000],
    ['a date in the past', 'past', 0],
    ['garbage', 'soon', 0],
    ['a negative number', '-5', 0],
    ['a huge number (capped at maxRetryAfterMs)', '999999999999', 30_000],
  ])('Retry-After as %s sets the floor', async (_name, header, floorMs) => {
    vi.setSystemTime(new Date('2026-01-01T00:00:00.000Z')); // HTTP dates have whole seconds
    const value =
      header === 'in 5 s'
        ? new Date(Date.now() + 5_000).toUTCString()
        : header === 'past'
          ? new Date(Date.now() - 60_000).toUTCString()
          : header;
    const { client, retries } = setup(
      [{ status: 503, headers: { 'Retry-After': value } }, { data: 1 }],
      {
        random: () => 0, // no jitter: the delay is the floor alone
        deadlineMs: 60_000,
      },
    );
    const result = settle(client.query('x'));
    await vi.runAllTimersAsync();
    expect((await result).ok).toBe(true);
    expect(retries[0]?.delayMs).toBe(floorMs);
  });

  it('the floor exceeds maxDelayMs, and jitter above the floor still counts', async () => {
    const { client, retries } = setup(
      [{ status: 429, headers: { 'Retry-After': '2' } }, { data: 1 }],
      {
        baseDelayMs: 10_000,
        maxDelayMs: 1_000,
        random: () => 0.99,
      },
    );
    const result = settle(client.query('x'));
    await vi.runAllTimersAsync();
    await result;
    expect(retries[0]?.delayMs).toBe(2_000);

    const jittered = setup([{ status: 429, headers: { 'Retry-After': '1' } }, { data: 1 }], {
      baseDelayMs: 4_000,
      random: () => 0.5,
    });
    const second = settle(jittered.client.query('x'));
    await vi.runAllTimersAsync();
    await second;
    expect(jittered.retries[0]?.delayMs).toBe(2_000);
  });

  it('prefers idem’s retryAfterMs over the whole-second header', async () => {
    const { client, retries } = setup(
      [
        {
          status: 409,
          idempotency: { code: 'REQUEST_IN_PROGRESS', retryAfterMs: 1_250 },
          headers: { 'Retry-After': '2', 'Idempotency-Status': 'in-progress' },
        },
        { data: 1 },
      ],
      { random: () => 0 },
    );
    const result = settle(client.mutation('x', {}, KEYED));
    await vi.runAllTimersAsync();
    await result;
    expect(retries[0]?.delayMs).toBe(1_250);
  });

  it('does not start a sleep that would end past the deadline', async () => {
    const { client, server } = setup(
      [{ status: 503, headers: { 'Retry-After': '5' } }, { data: 1 }],
      {
        deadlineMs: 4_000,
      },
    );
    const result = await settle(client.query('x'));
    expect(result.ok).toBe(false);
    if (!result.ok) expect((result.error as TRPCClientError<AnyRouter>).data?.httpStatus).toBe(503);
    // Given up on a transient failure: not "failed", the outcome is unknown.
    expect(!result.ok && isOutcomeUnknown(result.error)).toBe(true);
    expect(server.calls).toHaveLength(1);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('counts the deadline from the first send, across attempts', async () => {
    const { client, server } = setup([{ status: 503, headers: { 'Retry-After': '2' } }], {
      deadlineMs: 5_000,
      random: () => 0,
    });
    const result = settle(client.query('x'));
    await vi.runAllTimersAsync();
    expect((await result).ok).toBe(false);
    // Sends at 0, 2 s and 4 s; a third sleep would end at 6 s, past the deadline.
    expect(server.calls).toHaveLength(3);
  });
});

describe('keyedRetryLink: budget', () => {
  it('fails at once with RetryBudgetExhaustedError when the budget is empty', async () => {
    const budget = new RetryBudget({ capacity: 10, retryCost: 5, timeoutCost: 10 });
    const { client, server } = setup([{ status: 503 }], { budget, maxAttempts: 10 });

    const first = settle(client.query('x'));
    await vi.runAllTimersAsync();
    const settled = await first;
    // Two retries paid for (10 tokens), the third refused.
    expect(server.calls).toHaveLength(3);
    expect(budget.available).toBe(0);
    expect(settled.ok).toBe(false);
    if (settled.ok) return;
    const error = settled.error as TRPCClientError<AnyRouter>;
    expect(error).toBeInstanceOf(TRPCClientError);
    expect(isRetryBudgetExhaustedError(error.cause)).toBe(true);
    expect(error.message).toMatch(/Retry budget exhausted/);
    // The last server error is the cause, and its shape is kept for code that reads data.
    expect((error.cause as Error).cause).toBeInstanceOf(TRPCClientError);
    expect(error.data?.httpStatus).toBe(503);
    // Not "failed": the call may have run, and a retry with the same key is safe later.
    expect(error.message).toMatch(/outcome is unknown/);
    expect(isOutcomeUnknown(error)).toBe(true);

    // The next failing call fails at once: one send, no sleep.
    const second = settle(client.query('x'));
    await vi.advanceTimersByTimeAsync(0);
    expect(server.calls).toHaveLength(4);
    expect(vi.getTimerCount()).toBe(0);
    const secondSettled = await second;
    expect(
      !secondSettled.ok && isRetryBudgetExhaustedError((secondSettled.error as Error).cause),
    ).toBe(true);
  });

  it('charges the timeout cost after no response, the retry cost after an error response', async () => {
    const budget = new RetryBudget({ capacity: 100, retryCost: 5, timeoutCost: 10 });
    const { client } = setup([{ networkError: true }, { status: 503 }, { status: 404 }], {
      budget,
    });
    const result = settle(client.query('x'));
    await vi.runAllTimersAsync();
    await result;
    expect(budget.available).toBe(85);
  });

  it('a success refunds: the last retry in full, a first-try success by successRefund', async () => {
    const budget = new RetryBudget({
      capacity: 20,
      retryCost: 5,
      timeoutCost: 10,
      successRefund: 1,
    });
    const failing = setup([{ status: 503 }], { budget, maxAttempts: 3 });
    const drained = settle(failing.client.query('x'));
    await vi.runAllTimersAsync();
    await drained;
    expect(budget.available).toBe(10);

    const recovering = setup([{ status: 503 }, { data: 'ok' }], { budget });
    const recovered = settle(recovering.client.query('x'));
    await vi.runAllTimersAsync();
    expect((await recovered).ok).toBe(true);
    expect(budget.available).toBe(10); // paid 5, refunded 5

    const healthy = setup([{ data: 'ok' }], { budget });
    await healthy.client.query('x');
    expect(budget.available).toBe(11);
  });

  it('one budget per link instance by default; a shared one bounds several clients', async () => {
    const own = setup([{ status: 503 }], { maxAttempts: 2 });
    const other = setup([{ status: 503 }], { maxAttempts: 2 });
    const results = [settle(own.client.query('x')), settle(other.client.query('x'))];
    await vi.runAllTimersAsync();
    await Promise.all(results);
    expect(own.server.calls).toHaveLength(2);
    expect(other.server.calls).toHaveLength(2);

    const shared = new RetryBudget({ capacity: 5, retryCost: 5, timeoutCost: 5 });
    const a = setup([{ status: 503 }], { budget: shared, maxAttempts: 2 });
    const b = setup([{ status: 503 }], { budget: shared, maxAttempts: 2 });
    const first = settle(a.client.query('x'));
    await vi.runAllTimersAsync();
    await first;
    const second = settle(b.client.query('x'));
    await vi.runAllTimersAsync();
    const secondSettled = await second;
    expect(a.server.calls).toHaveLength(2);
    expect(b.server.calls).toHaveLength(1);
    expect(
      !secondSettled.ok && isRetryBudgetExhaustedError((secondSettled.error as Error).cause),
    ).toBe(true);
  });

  it('a budget exhausted after no response: outcome unknown, transient, classified by its cause', async () => {
    const budget = new RetryBudget({ capacity: 10, retryCost: 10, timeoutCost: 10 });
    const { client } = setup([{ networkError: true }], { budget, maxAttempts: 10 });
    const result = settle(client.mutation('order.place', {}, KEYED));
    await vi.runAllTimersAsync();
    const settled = await result;
    expect(settled.ok).toBe(false);
    if (settled.ok) return;
    expect(isRetryBudgetExhaustedError((settled.error as Error).cause)).toBe(true);
    expect(classifyError(settled.error)).toMatchObject({ outcome: 'no-response', transient: true });
    expect(isOutcomeUnknown(settled.error)).toBe(true);
  });

  it('the default budget: one client losing 30 % of its replies, 50 calls in flight, never runs dry', async () => {
    const random = seededRandom(30);
    const { client } = setup(() => (random() < 0.3 ? { networkError: true } : { data: 'ok' }));
    const exhausted: unknown[] = [];
    let running = 0;
    const call = async (index: number) => {
      running += 1;
      await settle(
        client.mutation('order.place', {}, { context: { idempotencyKey: `k-${index}` } }),
      ).then((settled) => {
        if (!settled.ok && isRetryBudgetExhaustedError((settled.error as Error).cause)) {
          exhausted.push(settled.error);
        }
      });
      running -= 1;
    };
    let next = 0;
    const worker = async () => {
      while (next < 3_000) await call(next++);
    };
    const done = Promise.all(Array.from({ length: 50 }, worker));
    await vi.runAllTimersAsync();
    await done;
    expect(running).toBe(0);
    expect(exhausted).toEqual([]);
  });

  it('the default budget still stops a storm: against a dead server, 400 retries and then none', async () => {
    const { client, server, retries } = setup([{ networkError: true }], { maxAttempts: 5 });
    const results = Array.from({ length: 300 }, (_, index) =>
      settle(client.mutation('order.place', {}, { context: { idempotencyKey: `k-${index}` } })),
    );
    await vi.runAllTimersAsync();
    const settled = await Promise.all(results);
    expect(retries).toHaveLength(400);
    expect(server.calls).toHaveLength(300 + 400);
    const refused = settled.filter(
      (result) => !result.ok && isRetryBudgetExhaustedError((result.error as Error).cause),
    );
    expect(refused.length).toBeGreaterThan(0);
  });

  it('budget: false never refuses a retry', async () => {
    const { client, server } = setup([{ networkError: true }], {
      budget: false,
      maxAttempts: 200,
      deadlineMs: Number.POSITIVE_INFINITY,
    });
    const result = settle(client.query('x'));
    await vi.runAllTimersAsync();
    await result;
    expect(server.calls).toHaveLength(200);
  });
});

describe('keyedRetryLink: cancellation', () => {
  it('aborting the signal during a backoff sleep fails the call at once and sends nothing more', async () => {
    const controller = new AbortController();
    const { client, server } = setup([{ status: 503 }, { data: 'never' }], {
      baseDelayMs: 10_000,
      random: () => 0.9,
    });
    const result = settle(client.query('x', undefined, { signal: controller.signal }));
    await vi.advanceTimersByTimeAsync(0);
    expect(vi.getTimerCount()).toBe(1); // sleeping

    controller.abort();
    const settled = await result; // no timer advanced: the abort alone settles it
    expect(settled.ok).toBe(false);
    if (!settled.ok) {
      expect(settled.error).toBeInstanceOf(TRPCClientError);
      expect(((settled.error as Error).cause as Error).name).toBe('AbortError');
    }
    expect(vi.getTimerCount()).toBe(0);
    await vi.runAllTimersAsync();
    expect(server.calls).toHaveLength(1);
  });

  it('unsubscribing during a backoff sleep clears the timer and sends nothing more', async () => {
    const server = scriptedLink([{ status: 503 }, { data: 'never' }]);
    const link: TRPCLink<AnyRouter> = keyedRetryLink({ baseDelayMs: 10_000, random: () => 0.9 });
    const chain = link({})({
      op: {
        id: 1,
        type: 'query',
        path: 'x',
        input: undefined,
        context: {},
        signal: null,
      },
      next: (op) => server.link({})({ op, next: () => expect.unreachable() }),
    });
    const events: string[] = [];
    const subscription = chain.subscribe({
      next: () => events.push('next'),
      error: () => events.push('error'),
      complete: () => events.push('complete'),
    });
    await vi.advanceTimersByTimeAsync(0);
    expect(vi.getTimerCount()).toBe(1);
    subscription.unsubscribe();
    expect(vi.getTimerCount()).toBe(0);
    await vi.runAllTimersAsync();
    expect(server.calls).toHaveLength(1);
    expect(events).toEqual([]);
  });

  it('unsubscribing during an attempt cancels that attempt', async () => {
    const server = scriptedLink([{ data: 'late' }]);
    const link: TRPCLink<AnyRouter> = keyedRetryLink();
    const chain = link({})({
      op: { id: 1, type: 'query', path: 'x', input: undefined, context: {}, signal: null },
      next: (op) => server.link({})({ op, next: () => expect.unreachable() }),
    });
    const subscription = chain.subscribe({});
    expect(server.pending).toBe(1);
    subscription.unsubscribe();
    expect(server.pending).toBe(0);
  });
});

describe('keyedRetryLink: attemptTimeoutMs', () => {
  it('aborts an attempt that gets no reply within 10 s (the default) and retries it with the same key', async () => {
    const server = scriptedLink([{ hang: true }, { data: 'placed' }]);
    const retries: RetryEvent[] = [];
    const client = createTRPCUntypedClient({
      links: [
        idempotencyLink(),
        keyedRetryLink({ random: () => 0, onRetry: (event) => retries.push(event) }),
        server.link,
      ],
    });
    const result = settle(client.mutation('order.place', { sku: 'tea' }));
    await vi.advanceTimersByTimeAsync(9_999);
    expect(server.calls).toHaveLength(1);
    expect(server.pending).toBe(1);

    await vi.advanceTimersByTimeAsync(1);
    // The hung attempt was cancelled (unsubscribed), not left running beside the retry.
    expect(retries).toHaveLength(1);
    const [retry] = retries;
    if (retry === undefined) expect.unreachable('the timed-out attempt was not retried');
    const timedOut = retry.error;
    expect(timedOut.cause?.name).toBe('TimeoutError');
    expect(timedOut.message).toMatch(/no reply within attemptTimeoutMs \(10000 ms\)/);
    expect(isOutcomeUnknown(timedOut)).toBe(true);

    await vi.runAllTimersAsync();
    expect(await result).toEqual({ ok: true, value: 'placed' });
    expect(server.calls).toHaveLength(2);
    expect(server.pending).toBe(0);
    const keys = server.calls.map((op) => op.context.idempotencyKey);
    expect(keys[0]).toBeDefined();
    expect(keys[1]).toBe(keys[0]);
  });

  it('an attempt that keeps hanging ends the call after maxAttempts: outcome unknown', async () => {
    const budget = new RetryBudget({ capacity: 100, retryCost: 5, timeoutCost: 10 });
    const { client, server } = setup([{ hang: true }], {
      attemptTimeoutMs: 500,
      maxAttempts: 3,
      budget,
    });
    const result = settle(client.mutation('order.place', {}, KEYED));
    await vi.runAllTimersAsync();
    const settled = await result;
    expect(settled.ok).toBe(false);
    if (settled.ok) return;
    expect((settled.error as TRPCClientError<AnyRouter>).cause?.name).toBe('TimeoutError');
    expect(isOutcomeUnknown(settled.error)).toBe(true);
    expect(server.calls).toHaveLength(3);
    expect(server.pending).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
    // Each retry after a timeout paid the timeout cost.
    expect(budget.available).toBe(80);
  });

  it('a reply before the timeout clears its timer', async () => {
    const { client } = setup([{ data: 1 }], { attemptTimeoutMs: 1_000 });
    expect(await client.query('x')).toBe(1);
    expect(vi.getTimerCount()).toBe(0);
  });

  it.each([
    ['false', false],
    ['Infinity', Number.POSITIVE_INFINITY],
  ] as const)(
    'attemptTimeoutMs: %s lets an attempt wait as long as it takes',
    async (_name, attemptTimeoutMs) => {
      const { client, server } = setup([{ hang: true }], { attemptTimeoutMs });
      const result = settle(client.query('x'));
      await vi.advanceTimersByTimeAsync(0);
      expect(vi.getTimerCount()).toBe(0);
      await vi.advanceTimersByTimeAsync(60 * 60_000);
      expect(server.pending).toBe(1);
      expect(server.calls).toHaveLength(1);
      void result;
    },
  );

  it('the caller aborting during an attempt cancels it; no timeout fires afterwards', async () => {
    const controller = new AbortController();
    const { client, server, retries } = setup([{ hang: true }], { attemptTimeoutMs: 1_000 });
    const subscription = client.query('x', undefined, { signal: controller.signal });
    const result = settle(subscription);
    await vi.advanceTimersByTimeAsync(0);
    controller.abort();
    expect((await result).ok).toBe(false);
    await vi.advanceTimersByTimeAsync(5_000);
    expect(retries).toHaveLength(0);
    expect(server.calls).toHaveLength(1);
    expect(server.pending).toBe(0);
  });
});
