import { isNodePostgresClient, isNodePostgresPool } from '../../postgres/nodePostgresClient.js';
import type { PgDatabaseLike } from '../../postgres/PgDatabaseLike.js';
import { OUTBOX_CHANNEL } from '../internal/constants.js';
import { listenOnClient, listenOnPool } from './listenNodePostgres.js';

type Unlisten = () => Promise<void>;

interface PostgresJsLike {
  listen(
    channel: string,
    onNotify: (payload: string) => void,
    onListen?: () => void,
  ): Promise<{ unlisten(): Promise<void> }>;
}

interface PgliteLike {
  listen(channel: string, onNotify: (payload: string) => void): Promise<Unlisten>;
}

/**
 * Subscribes to `NOTIFY idem_outbox` through the database's own driver client, when the
 * driver can (postgres-js: a dedicated connection that re-subscribes after a reconnect;
 * node-postgres: a connection checked out of the `Pool` and held until stop, or the app's
 * own `Client`; PGlite: in process). Returns how to unsubscribe, or `undefined` for a driver
 * without LISTEN, in which case the relay just polls.
 */
export async function listenForWakeUps(
  db: PgDatabaseLike,
  wake: () => void,
): Promise<Unlisten | undefined> {
  const client: unknown = (db as { $client?: unknown }).$client;
  if (!client || (typeof client !== 'object' && typeof client !== 'function')) return undefined;
  if (typeof (client as { listen?: unknown }).listen === 'function') {
    return typeof client === 'function'
      ? listenOnPostgresJs(client as unknown as PostgresJsLike, wake)
      : listenOnPglite(client as PgliteLike, wake);
  }
  if (isNodePostgresPool(client)) return listenOnPool(client, wake);
  if (isNodePostgresClient(client)) return listenOnClient(client, wake);
  return undefined;
}

async function listenOnPostgresJs(client: PostgresJsLike, wake: () => void): Promise<Unlisten> {
  // `sql` is a tagged-template function. `onListen` also runs after every reconnect, when
  // notifications may have been missed: wake then too.
  const subscription = await client.listen(OUTBOX_CHANNEL, wake, wake);
  return () => subscription.unlisten();
}

async function listenOnPglite(client: PgliteLike, wake: () => void): Promise<Unlisten | undefined> {
  const unlisten = await client.listen(OUTBOX_CHANNEL, wake);
  return typeof unlisten === 'function' ? () => unlisten() : undefined;
}
