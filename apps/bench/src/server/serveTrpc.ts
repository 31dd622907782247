import type { AddressInfo } from 'node:net';
import { type IdempotencyRequestContext, idempotencyContext } from '@idem/server';
import type { AnyRouter } from '@trpc/server';
import { createHTTPServer } from '@trpc/server/adapters/standalone';

export interface ServedTrpc {
  port: number;
  close(): Promise<void>;
}

/**
 * Serves a router over node:http on 127.0.0.1 with tRPC's standalone adapter. The
 * context carries idem's request context (keys in, `Idempotent-Replayed` /
 * `Idempotency-Status` / `Retry-After` out) plus the principal from `x-tenant`.
 */
export async function serveTrpc(router: AnyRouter, port: number): Promise<ServedTrpc> {
  const server = createHTTPServer({
    router,
    createContext: ({ req, res, info }): IdempotencyRequestContext & Record<string, unknown> => ({
      ...idempotencyContext({
        req: { headers: req.headers, url: req.url },
        info,
        resHeaders: {
          get: (name) => {
            const value = res.getHeader(name);
            return value === undefined ? null : String(value);
          },
          set: (name, value) => res.setHeader(name, value),
        },
      }),
      principal: typeof req.headers['x-tenant'] === 'string' ? req.headers['x-tenant'] : 'bench',
    }),
  });
  // Keep-alive longer than the load generator's idle gaps between runs.
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
