import { ConfigurationError } from '@idem/core';
import { createTRPCUntypedClient, TRPCClientError } from '@trpc/client';
import type { AnyRouter } from '@trpc/server';
import { describe, expect, it, vi } from 'vitest';
import { fakeTimersPerTest, KEYED, settle, setup } from '../../test/retryLinkHarness.js';
import { scriptedLink } from '../../test/scriptedLink.js';
import { idempotencyLink } from './idempotencyLink.js';
import { keyedRetryLink } from './keyedRetryLink.js';

// What is retried, and the options. The delays, the budget and cancellation have files
// of their own (keyedRetryLink.*.test.ts); decideRetry.test.ts tests each decision alone.

fakeTimersPerTest();

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
