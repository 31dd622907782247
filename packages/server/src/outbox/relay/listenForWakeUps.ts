import type { PgDatabaseLike } from '../../postgres/PgDatabaseLike.js';
import { OUTBOX_CHANNEL } from '../internal/constants.js';

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
 * Subscribes to `NOTIFY idem_outbox` on the database's own driver client, when the driver
 * can (postgres-js: a dedicated connection that re-subscribes after a reconnect; PGlite:
 * in process). Returns how to unsubscribe, or `undefined` for a driver without LISTEN, in
 * which case the relay just polls.
 */
export async function listenForWakeUps(
  db: PgDatabaseLike,
  wake: () => void,
): Promise<Unlisten | undefined> {
  const client: unknown = (db as { $client?: unknown }).$client;
  if (!client || typeof (client as { listen?: unknown }).listen !== 'function') return undefined;
  if (typeof client === 'function') {
    // postgres-js: `sql` is a tagged-template function. `onListen` also runs after every
    // reconnect, when notifications may have been missed: wake then too.
    const subscription = await (client as unknown as PostgresJsLike).listen(
      OUTBOX_CHANNEL,
      wake,
      wake,
    );
    return () => subscription.unlisten();
  }
  const unlisten = await (client as PgliteLike).listen(OUTBOX_CHANNEL, wake);
  return typeof unlisten === 'function' ? () => unlisten() : undefined;
}
