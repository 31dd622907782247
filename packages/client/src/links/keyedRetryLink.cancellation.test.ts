import { RetryBudget } from '@idem/core';
import { createTRPCUntypedClient, TRPCClientError, type TRPCLink } from '@trpc/client';
import type { AnyRouter } from '@trpc/server';
import { describe, expect, it, vi } from 'vitest';
import { fakeTimersPerTest, KEYED, settle, setup } from '../../test/retryLinkHarness.js';
import { scriptedLink } from '../../test/scriptedLink.js';
import { isOutcomeUnknown } from '../isOutcomeUnknown.js';
import { idempotencyLink } from './idempotencyLink.js';
import type { RetryEvent } from './KeyedRetryLinkOptions.js';
import { keyedRetryLink } from './keyedRetryLink.js';

// Ending a call or an attempt: the caller's signal, unsubscribing, attemptTimeoutMs.

fakeTimersPerTest();

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

  it('the caller aborting inside retryOn fails the call with the abort and sends nothing more', async () => {
    const controller = new AbortController();
    const { client, server } = setup([{ status: 503 }, { data: 'never' }], {
      retryOn: ({ transient }) => {
        controller.abort();
        return transient;
      },
    });
    const result = settle(client.query('x', undefined, { signal: controller.signal }));
    await vi.runAllTimersAsync();
    const settled = await result;
    expect(settled.ok).toBe(false);
    if (!settled.ok) expect(((settled.error as Error).cause as Error).name).toBe('AbortError');
    expect(server.calls).toHaveLength(1);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('unsubscribing inside retryOn or onRetry sends nothing more and reports nothing', async () => {
    for (const hook of ['retryOn', 'onRetry'] as const) {
      const server = scriptedLink([{ status: 503 }, { data: 'never' }]);
      let subscription: { unsubscribe(): void } | undefined;
      const leave = () => subscription?.unsubscribe();
      const link: TRPCLink<AnyRouter> = keyedRetryLink(
        hook === 'retryOn'
          ? {
              retryOn: ({ transient }) => {
                leave();
                return transient;
              },
            }
          : { onRetry: leave },
      );
      const chain = link({})({
        op: { id: 1, type: 'query', path: 'x', input: undefined, context: {}, signal: null },
        next: (op) => server.link({})({ op, next: () => expect.unreachable() }),
      });
      const events: string[] = [];
      subscription = chain.subscribe({
        next: () => events.push('next'),
        error: () => events.push('error'),
        complete: () => events.push('complete'),
      });
      await vi.runAllTimersAsync();
      expect({ hook, calls: server.calls.length, events }).toEqual({ hook, calls: 1, events: [] });
      expect(vi.getTimerCount()).toBe(0);
    }
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
