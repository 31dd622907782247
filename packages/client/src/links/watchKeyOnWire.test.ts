import { createTRPCClient, httpBatchLink, httpLink, TRPCClientError } from '@trpc/client';
import { initTRPC, TRPCError } from '@trpc/server';
import { fetchRequestHandler } from '@trpc/server/adapters/fetch';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { scriptedLink } from '../../test/scriptedLink.js';
import { idempotencyHeaders } from '../idempotencyHeaders.js';
import { idempotencyLink } from './idempotencyLink.js';
import { keyedRetryLink } from './keyedRetryLink.js';
import { retryingIdempotencyLink } from './retryingIdempotencyLink.js';

/**
 * A tRPC server (the Fetch adapter, answering the client's `fetch` in process) whose
 * `order.place` requires a key, as `@idem/server`'s middleware does: a mutation that
 * arrives without one is refused with a 400. `keysSeen` lists what reached it.
 */
function createServer() {
  const t = initTRPC.context<{ keys: (string | null)[] }>().create();
  const keysSeen: (string | null)[] = [];
  const router = t.router({
    order: t.router({
      place: t.procedure.mutation(({ ctx }) => {
        const [key] = ctx.keys;
        if (key === undefined || key === null) {
          throw new TRPCError({ code: 'BAD_REQUEST', message: 'an idempotency key is required' });
        }
        return { orderId: key };
      }),
    }),
  });
  const fetch = (input: RequestInfo | URL, init?: unknown) =>
    fetchRequestHandler({
      endpoint: '/trpc',
      req: new Request(input, init as RequestInit),
      router,
      createContext: ({ req, info }) => {
        const batch = req.headers.get('Idempotency-Key-Batch');
        const byIndex = batch === null ? {} : (JSON.parse(batch) as Record<string, string>);
        const keys = info.calls.map((_, index) =>
          batch === null ? req.headers.get('Idempotency-Key') : (byIndex[String(index)] ?? null),
        );
        keysSeen.push(...keys);
        return { keys };
      },
    });
  return { router, fetch, keysSeen };
}

type Server = ReturnType<typeof createServer>;
const url = 'http://shop.test/trpc';
const terminating = {
  httpLink: (server: Server, headers?: typeof idempotencyHeaders) =>
    httpLink({ url, fetch: server.fetch, ...(headers ? { headers } : {}) }),
  httpBatchLink: (server: Server, headers?: typeof idempotencyHeaders) =>
    httpBatchLink({ url, fetch: server.fetch, ...(headers ? { headers } : {}) }),
} as const;

/** The warnings about a key that did not reach the wire, among every console.warn. */
const keyWarnings = (warn: { mock: { calls: unknown[][] } }) =>
  warn.mock.calls
    .map(([message]) => String(message))
    .filter((m) => /without its idempotency key/.test(m));

describe('the warning for a key that never reached the wire', () => {
  afterEach(() => {
    vi.restoreAllMocks();
    vi.unstubAllEnvs();
  });

  for (const name of ['httpLink', 'httpBatchLink'] as const) {
    it(`warns once when ${name} was not given headers: idempotencyHeaders`, async () => {
      const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
      const server = createServer();
      const client = createTRPCClient<Server['router']>({
        links: [retryingIdempotencyLink(), terminating[name](server)],
      });
      const first = await client.order.place.mutate().catch((error: unknown) => error);
      expect(first).toBeInstanceOf(TRPCClientError);
      expect(server.keysSeen).toEqual([null]);
      const warnings = keyWarnings(warn);
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toContain('retryingIdempotencyLink: mutation "order.place"');
      expect(warnings[0]).toContain('`headers: idempotencyHeaders`');

      await client.order.place.mutate().catch(() => undefined);
      expect(keyWarnings(warn)).toHaveLength(1); // once per link
    });

    it(`does not warn when ${name} has headers: idempotencyHeaders`, async () => {
      const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
      const server = createServer();
      const client = createTRPCClient<Server['router']>({
        links: [retryingIdempotencyLink(), terminating[name](server, idempotencyHeaders)],
      });
      const context = { idempotencyKey: `pinned-${name}` };
      // A double click with one pinned key: two calls (one batch for httpBatchLink).
      const results = await Promise.all([
        client.order.place.mutate(undefined, { context }),
        client.order.place.mutate(undefined, { context }),
        client.order.place.mutate(),
      ]);
      expect(results.map((result) => result.orderId).slice(0, 2)).toEqual([
        context.idempotencyKey,
        context.idempotencyKey,
      ]);
      expect(server.keysSeen).not.toContain(null);
      expect(warn).not.toHaveBeenCalled();
    });
  }

  it('does not warn with idempotencyHeaders.with(own headers)', async () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    const server = createServer();
    const headers = idempotencyHeaders.with(async () => ({ authorization: 'Bearer t' }));
    const client = createTRPCClient<Server['router']>({
      links: [retryingIdempotencyLink(), httpBatchLink({ url, fetch: server.fetch, headers })],
    });
    await client.order.place.mutate();
    expect(warn).not.toHaveBeenCalled();
  });

  it('warns naming idempotencyLink when that link is composed by hand', async () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    const server = createServer();
    const client = createTRPCClient<Server['router']>({
      links: [idempotencyLink(), keyedRetryLink(), httpLink({ url, fetch: server.fetch })],
    });
    await client.order.place.mutate().catch(() => undefined);
    const warnings = keyWarnings(warn);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain('idempotencyLink: mutation "order.place"');
  });

  it('warns also when the server ran the mutation without a key', async () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    const t = initTRPC.create();
    const router = t.router({ ping: t.procedure.mutation(() => 'pong') });
    const client = createTRPCClient<typeof router>({
      links: [
        retryingIdempotencyLink(),
        httpLink({
          url,
          fetch: (input, init) =>
            fetchRequestHandler({
              endpoint: '/trpc',
              req: new Request(input, init as RequestInit),
              router,
            }),
        }),
      ],
    });
    expect(await client.ping.mutate()).toBe('pong');
    expect(keyWarnings(warn)).toHaveLength(1);
  });

  it('does not warn in production', async () => {
    vi.stubEnv('NODE_ENV', 'production');
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    const server = createServer();
    const client = createTRPCClient<Server['router']>({
      links: [retryingIdempotencyLink(), httpBatchLink({ url, fetch: server.fetch })],
    });
    await client.order.place.mutate().catch(() => undefined);
    expect(server.keysSeen).toEqual([null]);
    expect(warn).not.toHaveBeenCalled();
  });

  it('does not warn for a terminating link that is not HTTP', async () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    const server = scriptedLink([{ data: 'ok' }]);
    const client = createTRPCClient<Server['router']>({
      links: [retryingIdempotencyLink(), server.link],
    });
    await client.order.place.mutate();
    expect(warn).not.toHaveBeenCalled();
  });
});
