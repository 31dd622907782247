import { isRetryBudgetExhaustedError, RetryBudget } from '@idem/core';
import { seededRandom } from '@idem/core/testing';
import { TRPCClientError } from '@trpc/client';
import type { AnyRouter } from '@trpc/server';
import { describe, expect, it, vi } from 'vitest';
import { fakeTimersPerTest, KEYED, settle, setup } from '../../test/retryLinkHarness.js';
import { classifyError } from '../classifyError.js';
import { isOutcomeUnknown } from '../isOutcomeUnknown.js';

// The retry budget: what a retry costs, what a success refunds, what an empty one does.

fakeTimersPerTest();

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
