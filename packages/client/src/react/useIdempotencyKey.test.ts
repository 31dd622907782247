// @vitest-environment happy-dom
import { QueryClient, QueryClientProvider, useMutation } from '@tanstack/react-query';
import { createTRPCClient, type TRPCLink } from '@trpc/client';
import { initTRPC } from '@trpc/server';
import { observable } from '@trpc/server/observable';
import { createTRPCOptionsProxy, type TRPCOptionsProxy } from '@trpc/tanstack-react-query';
import { act, createElement, type ReactNode } from 'react';
import { createRoot, type Root } from 'react-dom/client';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isOutcomeUnknown } from '../isOutcomeUnknown.js';
import { idempotencyLink } from '../links/idempotencyLink.js';
import { keyedRetryLink } from '../links/keyedRetryLink.js';
import {
  type IdempotencyKeyState,
  type IntentKeyState,
  useIdempotencyKey,
} from './useIdempotencyKey.js';

declare global {
  var IS_REACT_ACT_ENVIRONMENT: boolean | undefined;
}

let root: Root;
let container: HTMLElement;

beforeEach(() => {
  globalThis.IS_REACT_ACT_ENVIRONMENT = true;
  container = document.createElement('div');
  root = createRoot(container);
});
afterEach(() => {
  act(() => root.unmount());
});

function render(node: ReactNode) {
  act(() => root.render(node));
}

function Probe({ label, seen }: { label: string; seen: IdempotencyKeyState[] }) {
  seen.push(useIdempotencyKey());
  return createElement('span', null, label);
}

const t = initTRPC.create();
const appRouter = t.router({
  order: t.router({
    place: t.procedure
      .input((value) => value as { sku: string })
      .mutation(({ input }) => ({ orderId: `order-for-${input.sku}` })),
  }),
});
type AppRouter = typeof appRouter;

/** The README's pattern: one key per logical submit, reset when the submit is over. */
function Checkout({
  trpc,
  expose,
}: {
  trpc: TRPCOptionsProxy<AppRouter>;
  expose: (placeOrder: () => void) => void;
}) {
  const { key, reset } = useIdempotencyKey();
  const mutation = useMutation(
    trpc.order.place.mutationOptions({
      trpc: { context: { idempotencyKey: key } },
      retry: false,
      onSuccess: () => reset(),
      onError: (error) => {
        if (!isOutcomeUnknown(error)) reset();
      },
    }),
  );
  expose(() => mutation.mutate({ sku: 'tea' }));
  return createElement('button', { type: 'button' }, 'Place order');
}

describe('useIdempotencyKey', () => {
  it('keeps one key across re-renders and gives a new one after reset', () => {
    const seen: IdempotencyKeyState[] = [];
    render(createElement(Probe, { label: 'a', seen }));
    render(createElement(Probe, { label: 'b', seen }));
    expect(seen).toHaveLength(2);
    expect(seen[1]?.key).toBe(seen[0]?.key);
    expect(seen[1]?.reset).toBe(seen[0]?.reset);

    act(() => seen[1]?.reset());
    expect(seen).toHaveLength(3);
    expect(seen[2]?.key).not.toBe(seen[0]?.key);
    expect(seen[2]?.key).toMatch(/^[0-9a-f-]{36}$/);
  });
});

function IntentProbe({ intent, seen }: { intent: string; seen: IntentKeyState[] }) {
  seen.push(useIdempotencyKey({ intent, storage: 'session' }));
  return createElement('span', null, intent);
}

describe('useIdempotencyKey({ intent })', () => {
  afterEach(() => sessionStorage.clear());

  it('a remount (a reload, Back) gets the same key; reset() settles it everywhere', () => {
    const before: IntentKeyState[] = [];
    render(createElement(IntentProbe, { intent: 'cart:1', seen: before }));
    const key = before.at(-1)?.key;
    expect(key).toMatch(/^[0-9a-f-]{36}$/);
    act(() => root.unmount());

    // The page again, after a reload: a new root, the same storage.
    root = createRoot(container);
    const after: IntentKeyState[] = [];
    render(createElement(IntentProbe, { intent: 'cart:1', seen: after }));
    expect(after.at(-1)?.key).toBe(key);

    // A second component on the same intent, then the intent settles in the first.
    const otherRoot = createRoot(document.createElement('div'));
    const other: IntentKeyState[] = [];
    act(() => otherRoot.render(createElement(IntentProbe, { intent: 'cart:1', seen: other })));
    expect(other.at(-1)?.key).toBe(key);
    act(() => after.at(-1)?.reset());
    const renewed = after.at(-1)?.key;
    expect(renewed).toMatch(/^[0-9a-f-]{36}$/);
    expect(renewed).not.toBe(key);
    expect(other.at(-1)?.key).toBe(renewed);
    act(() => otherRoot.unmount());
  });

  it('another intent (another cart) has another key', () => {
    const seen: IntentKeyState[] = [];
    render(createElement(IntentProbe, { intent: 'cart:1', seen }));
    const first = seen.at(-1)?.key;
    render(createElement(IntentProbe, { intent: 'cart:2', seen }));
    expect(seen.at(-1)?.key).not.toBe(first);
    render(createElement(IntentProbe, { intent: 'cart:1', seen }));
    expect(seen.at(-1)?.key).toBe(first);
  });
});

describe('useIdempotencyKey with @trpc/tanstack-react-query', () => {
  /** A server that answers only when told to, and records the key of every request. */
  function heldServer() {
    const keys: unknown[] = [];
    const pending: (() => void)[] = [];
    const link: TRPCLink<AppRouter> =
      () =>
      ({ op }) =>
        observable((observer) => {
          keys.push(op.context.idempotencyKey);
          pending.push(() => {
            observer.next({ result: { type: 'data', data: { orderId: `order-${keys.length}` } } });
            observer.complete();
          });
        });
    const answerAll = () => {
      for (const answer of pending.splice(0)) answer();
    };
    return { link, keys, answerAll };
  }

  it('a double click sends one key; the next submit after success gets a new one', async () => {
    const server = heldServer();
    const client = createTRPCClient<AppRouter>({
      links: [idempotencyLink(), keyedRetryLink(), server.link],
    });
    const queryClient = new QueryClient();
    const trpc = createTRPCOptionsProxy<AppRouter>({ client, queryClient });

    let placeOrder: (() => void) | undefined;
    const expose = (fn: () => void) => {
      placeOrder = fn;
    };
    render(
      createElement(
        QueryClientProvider,
        { client: queryClient },
        createElement(Checkout, { trpc, expose }),
      ),
    );

    // Two clicks before anything re-renders: the same logical submit.
    act(() => {
      placeOrder?.();
      placeOrder?.();
    });
    await act(async () => {
      await Promise.resolve();
    });
    expect(server.keys).toHaveLength(2);
    expect(server.keys[0]).toBe(server.keys[1]);

    await act(async () => {
      server.answerAll();
      await new Promise((resolve) => setTimeout(resolve, 0));
    });

    // After success the hook has a new key: the next submit is a new operation.
    await act(async () => {
      placeOrder?.();
      await new Promise((resolve) => setTimeout(resolve, 0));
    });
    expect(server.keys).toHaveLength(3);
    expect(server.keys[2]).toEqual(expect.any(String));
    expect(server.keys[2]).not.toBe(server.keys[0]);
    await act(async () => {
      server.answerAll();
      await new Promise((resolve) => setTimeout(resolve, 0));
    });
  });
});
