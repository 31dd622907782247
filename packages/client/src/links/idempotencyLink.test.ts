import { isInvalidKeyError } from '@idem/core';
import { createTRPCUntypedClient, TRPCClientError } from '@trpc/client';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { scriptedLink } from '../../test/scriptedLink.js';
import { idempotencyLink } from './idempotencyLink.js';
import { keyedRetryLink } from './keyedRetryLink.js';

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

function setup(options: Parameters<typeof idempotencyLink>[0] = {}) {
  const server = scriptedLink([{ data: 'ok' }]);
  const client = createTRPCUntypedClient({ links: [idempotencyLink(options), server.link] });
  return { client, server };
}

describe('idempotencyLink', () => {
  it('gives every mutation its own random UUID key', async () => {
    const { client, server } = setup();
    await client.mutation('order.place', { sku: 'tea' });
    await client.mutation('order.place', { sku: 'tea' });
    const [first, second] = server.calls.map((op) => op.context.idempotencyKey);
    expect(first).toMatch(UUID_V4);
    expect(second).toMatch(UUID_V4);
    expect(first).not.toBe(second);
  });

  it('keeps a key the caller put in the context', async () => {
    const { client, server } = setup({ keyFor: () => 'from-keyFor' });
    await client.mutation('order.place', {}, { context: { idempotencyKey: 'checkout-42' } });
    expect(server.calls[0]?.context.idempotencyKey).toBe('checkout-42');
  });

  it('uses keyFor(op) when it returns a key, and a UUID when it returns undefined', async () => {
    const { client, server } = setup({
      keyFor: (op) =>
        op.path === 'cart.checkout'
          ? `checkout:${(op.input as { cartId: string }).cartId}`
          : undefined,
    });
    await client.mutation('cart.checkout', { cartId: 'c-7' });
    await client.mutation('order.place', {});
    expect(server.calls[0]?.context.idempotencyKey).toBe('checkout:c-7');
    expect(server.calls[1]?.context.idempotencyKey).toMatch(UUID_V4);
  });

  it('leaves queries and subscriptions without a key', async () => {
    const { client, server } = setup();
    await client.query('order.get', { id: 1 });
    client.subscription('order.events', undefined, {}).unsubscribe();
    expect(server.calls.map((op) => op.context.idempotencyKey)).toEqual([undefined, undefined]);
  });

  it('does not write into the caller’s context object, which may be shared between calls', async () => {
    const { client, server } = setup();
    const shared = { traceId: 't-1' };
    await client.mutation('order.place', {}, { context: shared });
    await client.mutation('order.place', {}, { context: shared });
    expect(shared).toEqual({ traceId: 't-1' });
    expect(server.calls[0]?.context).toMatchObject({ traceId: 't-1' });
    expect(server.calls[0]?.context.idempotencyKey).not.toBe(
      server.calls[1]?.context.idempotencyKey,
    );
  });

  it.each([
    ['an empty key', ''],
    ['a key with a line break', 'abc\r\nX-Injected: 1'],
    ['a key that is too long', 'k'.repeat(256)],
    ['a key that is not a string', 42],
  ])('fails the call on %s, before sending anything', async (_name, idempotencyKey) => {
    const { client, server } = setup();
    const error = await client
      // The context type says string; a plain-JS caller may still pass anything.
      .mutation('order.place', {}, { context: { idempotencyKey: idempotencyKey as string } })
      .catch((thrown: unknown) => thrown);
    expect(error).toBeInstanceOf(TRPCClientError);
    expect(isInvalidKeyError((error as Error).cause)).toBe(true);
    expect((error as Error).message).toMatch(/Idempotency key must be 1–255 printable ASCII/);
    expect(server.calls).toHaveLength(0);
  });

  it('fails the call when keyFor returns an invalid key', async () => {
    const { client, server } = setup({ keyFor: () => 'ключ' });
    const error = await client.mutation('order.place', {}).catch((thrown: unknown) => thrown);
    expect(isInvalidKeyError((error as Error).cause)).toBe(true);
    expect(server.calls).toHaveLength(0);
  });
});

describe('idempotencyLink before keyedRetryLink', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('the key is chosen once per call and every retry repeats it', async () => {
    const keyFor = vi.fn(() => undefined);
    const server = scriptedLink((_op, index) =>
      index % 3 === 2 ? { data: index } : { status: 503 },
    );
    const client = createTRPCUntypedClient({
      links: [idempotencyLink({ keyFor }), keyedRetryLink({ random: () => 0.5 }), server.link],
    });
    const first = client.mutation('order.place', {});
    await vi.runAllTimersAsync();
    await first;
    const second = client.mutation('order.place', {});
    await vi.runAllTimersAsync();
    await second;

    const keys = server.calls.map((op) => op.context.idempotencyKey);
    expect(keys).toHaveLength(6);
    expect(new Set(keys.slice(0, 3)).size).toBe(1);
    expect(new Set(keys.slice(3)).size).toBe(1);
    expect(keys[0]).not.toBe(keys[3]);
    expect(keyFor).toHaveBeenCalledTimes(2);
  });

  it('placed after the retry link (wrong order) it would re-key each attempt; the retry link then refuses to retry', async () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    const server = scriptedLink([{ status: 503 }, { data: 'ok' }]);
    const client = createTRPCUntypedClient({
      links: [keyedRetryLink(), idempotencyLink(), server.link],
    });
    const result = client.mutation('order.place', {}).catch((error: unknown) => error);
    await vi.runAllTimersAsync();
    expect(await result).toBeInstanceOf(TRPCClientError);
    expect(server.calls).toHaveLength(1);
    // The retry link's warning about an unkeyed mutation, once.
    const unkeyed = warn.mock.calls.filter(([message]) =>
      /has no idempotency key/.test(String(message)),
    );
    expect(unkeyed).toHaveLength(1);
    warn.mockRestore();
  });
});
