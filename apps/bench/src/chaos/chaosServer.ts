/**
 * One app server of the soak, in its own process: `DATABASE_URL`, `PORT` (kept across
 * restarts, so the proxy's address for it stays valid), `SERVER_ID`.
 */
import { serveTrpcChild } from '../server/serveTrpc.js';
import { createChaosRouter } from './chaosRouter.js';

await serveTrpcChild({
  router: (db) => createChaosRouter(db, process.env.SERVER_ID ?? 'server'),
  pool: { max: Number(process.env.POOL_MAX ?? 5), connect_timeout: 5 },
  endTimeoutS: 2,
});
