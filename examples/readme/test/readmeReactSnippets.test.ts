// @vitest-environment happy-dom
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { idempotencyHeaders, retryingIdempotencyLink } from '@idem/client';
import { memoryStore } from '@idem/core/testing';
import { type IdempotencyRequestContext, idempotencyContext, idempotent } from '@idem/server';
import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { createTRPCClient, httpBatchLink } from '@trpc/client';
import { initTRPC } from '@trpc/server';
import { fetchRequestHandler } from '@trpc/server/adapters/fetch';
import { act, type ComponentType, createElement } from 'react';
import { createRoot, type Root } from 'react-dom/client';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { blocksIn, docsPages, readmes } from './readmeBlocks.js';

declare global {
  var IS_REACT_ACT_ENVIRONMENT: boolean | undefined;
}

/**
 * The React snippets of the READMEs and the docs pages (```tsx blocks), rendered and
 * clicked: each one's component runs against a real tRPC server with `idempotent()` (over
 * the Fetch adapter, in process) through `retryingIdempotencyLink`, as an app would wire
 * it. The blocks are written out beside a `./trpc` module, the app's
 * `createTRPCContext<AppRouter>()`, which is what every one of them imports.
 */
// Node's path helpers: happy-dom replaces the global URL with its own.
const here = dirname(fileURLToPath(import.meta.url));
const root = `${resolve(here, '../../..')}/`;
const dir = `${resolve(here, '../.snippets-react')}/`;

const TRPC_MODULE = `import { createTRPCContext } from '@trpc/tanstack-react-query';
import type { AppRouter } from '../test/readmeReactSnippets.test.js';

export const { TRPCProvider, useTRPC } = createTRPCContext<AppRouter>();
`;

/**
 * Every ```tsx block of the READMEs and the docs pages that is a tRPC component (it imports
 * the app's `./trpc` module), with the name of the component it exports. The others (a
 * Server Component's form) are type-checked only, by the snippet suites.
 */
const blocks = blocksIn(root, [...readmes(root), ...docsPages(root)], 'tsx')
  .filter((block) => /from '\.\/trpc(\.js)?'/.test(block.code))
  .map((block) => {
    const component = /export function (\w+)/.exec(block.code)?.[1];
    if (!component)
      throw new Error(`${block.readme}:${block.line}: a tsx block exports no component`);
    return { ...block, component };
  });

/** The props each component is rendered with, by its name. */
const PROPS: Record<string, Record<string, unknown>> = {
  PlaceOrderButton: { sku: 'sku-1' },
  PayButton: { cart: { id: 'cart-7f3a', version: 2, sku: 'sku-1' } },
};

/** The server: `order.place` under `idempotent()`, recording every execution and key. */
function createServer() {
  const t = initTRPC.context<IdempotencyRequestContext>().create();
  const executions: string[] = [];
  const keysSent: string[] = [];
  const router = t.router({
    order: t.router({
      place: t.procedure
        .use(idempotent({ store: memoryStore(), scope: () => 'shop' }))
        .input(z.object({ sku: z.string() }))
        .mutation(async ({ input, ctx }) => {
          executions.push(ctx.idempotency.key);
          // Long enough for a second click to arrive while the first call runs.
          await new Promise((resolve) => setTimeout(resolve, 20));
          return { orderId: executions.length, sku: input.sku };
        }),
    }),
  });
  const client = createTRPCClient<typeof router>({
    links: [
      retryingIdempotencyLink(),
      httpBatchLink({
        url: 'http://shop.test/trpc',
        headers: idempotencyHeaders,
        fetch: async (url, init) => {
          const request = new Request(url, init as RequestInit);
          // One call's key, or a batch's keys by index (httpBatchLink batches a double click).
          const batch = request.headers.get('idempotency-key-batch');
          const single = request.headers.get('idempotency-key');
          if (batch) keysSent.push(...Object.values<string>(JSON.parse(batch)));
          if (single) keysSent.push(single);
          return fetchRequestHandler({
            endpoint: '/trpc',
            req: request,
            router,
            createContext: (opts) => idempotencyContext(opts),
          });
        },
      }),
    ],
  });
  return { router, client, executions, keysSent };
}

export type AppRouter = ReturnType<typeof createServer>['router'];

rmSync(dir, { recursive: true, force: true });
mkdirSync(dir, { recursive: true });
writeFileSync(`${dir}trpc.ts`, TRPC_MODULE);

let reactRoot: Root;
let container: HTMLElement;

beforeEach(() => {
  globalThis.IS_REACT_ACT_ENVIRONMENT = true;
  localStorage.clear();
  container = document.createElement('div');
  document.body.append(container);
  reactRoot = createRoot(container);
});
afterEach(() => {
  act(() => reactRoot.unmount());
  container.remove();
});

/** Mounts `component` from snippet `index`, inside the providers an app puts around it. */
async function mount(index: number) {
  const block = blocks[index];
  if (!block) throw new Error(`no React snippet ${index}`);
  const file = `${dir}snippet-${String(index).padStart(2, '0')}.tsx`;
  writeFileSync(file, `// ${block.readme} (line ${block.line})\n${block.code}\n`);
  const snippet = (await import(/* @vite-ignore */ file)) as Record<string, ComponentType>;
  const component = snippet[block.component];
  if (!component) {
    throw new Error(`${block.readme} (line ${block.line}) exports no ${block.component}`);
  }
  const { TRPCProvider } = (await import(/* @vite-ignore */ `${dir}trpc.ts`)) as {
    TRPCProvider: ComponentType<Record<string, unknown>>;
  };
  const server = createServer();
  const queryClient = new QueryClient();
  const render = () =>
    act(() =>
      reactRoot.render(
        createElement(
          QueryClientProvider,
          { client: queryClient },
          createElement(
            TRPCProvider,
            { trpcClient: server.client, queryClient },
            createElement(component, PROPS[block.component] as never),
          ),
        ),
      ),
    );
  await render();
  const button = () => {
    const found = container.querySelector('button');
    if (!found) throw new Error(`${block.component} rendered no button`);
    return found;
  };
  /** Clicks `times` times in one go, then waits for every call to settle. */
  const click = async (times = 1) => {
    await act(async () => {
      for (let count = 0; count < times; count++) button().click();
      await expect.poll(() => queryClient.isMutating(), { timeout: 10_000 }).toBe(0);
    });
  };
  return { server, button, click, render };
}

describe('React snippets, rendered and clicked', () => {
  it('has a component in every React snippet, with props to render it', () => {
    expect(blocks.length).toBeGreaterThanOrEqual(2);
    for (const block of blocks) expect(Object.keys(PROPS)).toContain(block.component);
  });

  for (const [index, block] of blocks.entries()) {
    it(`${block.readme}: ${block.component} (line ${block.line}) pays once per submit`, async () => {
      const { server, button, click } = await mount(index);
      expect(button().disabled).toBe(false);

      // A double click sends the same key twice (the second call waits for the first,
      // retrying its "in progress" answer): the server runs the order once.
      await click(2);
      expect(server.keysSent.length).toBeGreaterThanOrEqual(2);
      expect(new Set(server.keysSent).size).toBe(1);
      expect(server.executions).toEqual([server.keysSent[0]]);

      // Success reset the key: the next submit is a new order.
      await click();
      expect(server.executions).toHaveLength(2);
      expect(server.executions[1]).not.toBe(server.executions[0]);
    });
  }

  it('keeps an intent key across a remount, as after a reload, until it is paid', async () => {
    const index = blocks.findIndex((block) => block.component === 'PayButton');
    expect(index).toBeGreaterThanOrEqual(0);
    const { server, click, render } = await mount(index);
    const stored = () => Object.values({ ...localStorage }).join();
    const before = stored();
    expect(before).not.toBe('');
    const remount = async () => {
      act(() => reactRoot.unmount());
      reactRoot = createRoot(container);
      await render();
    };
    await remount();
    expect(stored()).toBe(before);

    await click();
    const [paid] = server.keysSent;
    if (paid === undefined) throw new Error('the click sent no key');
    expect(before).toContain(paid);
    // Paid: the intent is settled, and the next Pay (even after a reload) has a new key.
    expect(stored()).not.toContain(paid);
    await remount();
    await click();
    expect(server.keysSent.at(-1)).not.toBe(paid);
    expect(server.executions).toHaveLength(2);
  });
});
