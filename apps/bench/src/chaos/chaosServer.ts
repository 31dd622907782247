/**
 * One app server of the soak, in its own process: `DATABASE_URL`, `PORT` (kept across
 * restarts, so the proxy's address for it stays valid), `SERVER_ID`.
 */
import { drizzle } from 'drizzle-orm/postgres-js';
import postgres from 'postgres';
import { serveParent } from '../lib/child.js';
import { quiet, requiredEnv } from '../lib/config.js';
import { serveTrpc } from '../server/serveTrpc.js';
import { createChaosRouter } from './chaosRouter.js';

const client = postgres(requiredEnv('DATABASE_URL'), {
  ...quiet,
  max: Number(process.env.POOL_MAX ?? 5),
  connect_timeout: 5,
});
const db = drizzle(client);
let close: (() => Promise<void>) | undefined;

const parent = serveParent({
  onStop: async () => {
    await close?.();
    await client.end({ timeout: 2 });
  },
});

try {
  const served = await serveTrpc(
    createChaosRouter(db, process.env.SERVER_ID ?? 'server'),
    Number(process.env.PORT ?? 0),
  );
  close = served.close;
  parent.ready({ port: served.port, pid: process.pid });
} catch (error) {
  parent.failed(error);
}
