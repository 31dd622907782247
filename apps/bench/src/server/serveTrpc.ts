import type { AddressInfo } from 'node:net';
import { type IdempotencyRequestContext, idempotencyContext } from '@idem/server';
import type { AnyRouter } from '@trpc/server';
import { createHTTPServer } from '@trpc/server/adapters/standalone';
import { drizzle, type PostgresJsDatabase } from 'drizzle-orm/postgres-js';
import postgres, { type Options, type Sql } from 'postgres';
import { type ChildMessage, serveParent } from '../lib/child.js';
import { quiet, requiredEnv } from '../lib/config.js';

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

/**
 * The body of a server child process: `router` over HTTP on `PORT` (any free port if unset)
 * against `DATABASE_URL` through a postgres-js pool (`pool`: its size and such), `ready`
 * with the port and pid once it listens. `stop` closes the server, then ends the pool,
 * waiting up to `endTimeoutS` for its connections. `requests`: what else the child answers.
 */
export async function serveTrpcChild({
  router,
  pool,
  endTimeoutS,
  ...handlers
}: {
  router: (db: PostgresJsDatabase, client: Sql) => AnyRouter;
  pool: Pick<Options<Record<string, never>>, 'max' | 'connect_timeout'>;
  endTimeoutS: number;
  requests?: Record<string, (message: ChildMessage) => Record<string, unknown>>;
}): Promise<void> {
  const client = postgres(requiredEnv('DATABASE_URL'), { ...quiet, ...pool });
  const db = drizzle(client);
  let close: (() => Promise<void>) | undefined;

  const parent = serveParent({
    ...handlers,
    onStop: async () => {
      await close?.();
      await client.end({ timeout: endTimeoutS });
    },
  });

  try {
    const served = await serveTrpc(router(db, client), Number(process.env.PORT ?? 0));
    close = served.close;
    parent.ready({ port: served.port, pid: process.pid });
  } catch (error) {
    parent.failed(error);
  }
}
