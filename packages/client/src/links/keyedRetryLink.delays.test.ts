import { seededRandom } from '@idem/core/testing';
import type { TRPCClientError } from '@trpc/client';
import type { AnyRouter } from '@trpc/server';
import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import { fakeTimersPerTest, KEYED, settle, setup } from '../../test/retryLinkHarness.js';
import { isOutcomeUnknown } from '../isOutcomeUnknown.js';

// How long the link waits: backoff with full jitter, Retry-After's floor, the deadline.

fakeTimersPerTest();

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
