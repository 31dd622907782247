import type {
  NodePostgresClientLike,
  NodePostgresPoolLike,
} from '../../postgres/nodePostgresClient.js';
import { OUTBOX_CHANNEL } from '../internal/constants.js';

type Unlisten = () => Promise<void>;

/**
 * How long after losing its connection the listener checks out another one. It waits on
 * the database's I/O, so on the real timers, not on the relay's clock; the relay still
 * polls meanwhile.
 */
const RELISTEN_DELAY_MS = 1_000;

/** Calls `wake` for each notification on idem's channel. */
const onChannel = (wake: () => void) => (message?: unknown) => {
  if ((message as { channel?: unknown } | undefined)?.channel === OUTBOX_CHANNEL) wake();
};

/**
 * LISTEN on the app's own node-postgres `Client`: its notifications arrive between the
 * relay's statements on that one connection. A lost connection is the app's to replace.
 */
export async function listenOnClient(
  client: NodePostgresClientLike,
  wake: () => void,
): Promise<Unlisten> {
  const onNotification = onChannel(wake);
  client.on('notification', onNotification);
  try {
    await client.query(`LISTEN ${OUTBOX_CHANNEL}`);
  } catch (error) {
    client.removeListener('notification', onNotification);
    throw error;
  }
  return async () => {
    client.removeListener('notification', onNotification);
    await client.query(`UNLISTEN ${OUTBOX_CHANNEL}`);
  };
}

type PooledClient = Awaited<ReturnType<NodePostgresPoolLike['connect']>>;

/** A checked-out connection that LISTENs, and the listeners the listener put on it. */
interface Listening {
  client: PooledClient;
  listeners: Record<'notification' | 'error' | 'end', (argument?: unknown) => void>;
}

/** The listener's one status. */
type ListenerState =
  | ({ status: 'listening' } & Listening)
  /** Its connection was lost: another is checked out after `RELISTEN_DELAY_MS`. */
  | { status: 'waiting'; timer: ReturnType<typeof setTimeout> }
  /** Checking out another connection and sending LISTEN on it. */
  | { status: 'subscribing'; done: Promise<void> }
  | { status: 'stopped' };

/**
 * Takes the listener's listeners off `client` and gives it back to the pool: to be reused,
 * or destroyed with `error`. The pool puts its own `error` listener back on as it takes it.
 */
function giveBack({ client, listeners }: Listening, error?: unknown): void {
  for (const [event, listener] of Object.entries(listeners)) client.removeListener(event, listener);
  client.release(error === undefined ? undefined : error instanceof Error ? error : true);
}

/**
 * LISTEN on a connection of its own, checked out of the app's node-postgres `Pool` and held
 * while the relay runs (a session is what receives notifications, so the pool has one
 * connection less for queries), given back on stop. A lost connection is destroyed, not
 * returned; the listener wakes the relay (a notification may have been missed) and checks
 * out another, as postgres-js re-subscribes after a reconnect.
 */
export async function listenOnPool(
  pool: NodePostgresPoolLike,
  wake: () => void,
): Promise<Unlisten> {
  let state: ListenerState = { status: 'stopped' };

  const subscribe = async (): Promise<void> => {
    const client = await pool.connect();
    const lost = (error?: unknown) => {
      if (state.status !== 'listening' || state.client !== client) return;
      giveBack(state, error ?? new Error('the LISTEN connection ended'));
      state = { status: 'waiting', timer: setTimeout(relisten, RELISTEN_DELAY_MS) };
      wake();
    };
    const listening: Listening = {
      client,
      listeners: { notification: onChannel(wake), error: lost, end: lost },
    };
    for (const [event, listener] of Object.entries(listening.listeners)) client.on(event, listener);
    try {
      await client.query(`LISTEN ${OUTBOX_CHANNEL}`);
    } catch (error) {
      giveBack(listening, error);
      throw error;
    }
    state = { status: 'listening', ...listening };
  };

  const relisten = () => {
    const done = subscribe().then(
      () => wake(),
      () => {
        if (state.status === 'subscribing') {
          state = { status: 'waiting', timer: setTimeout(relisten, RELISTEN_DELAY_MS) };
        }
      },
    );
    state = { status: 'subscribing', done };
  };

  await subscribe();
  return async () => {
    if (state.status === 'subscribing') await state.done;
    const current = state;
    state = { status: 'stopped' };
    if (current.status === 'waiting') clearTimeout(current.timer);
    if (current.status !== 'listening') return;
    try {
      await current.client.query(`UNLISTEN ${OUTBOX_CHANNEL}`);
    } catch (error) {
      giveBack(current, error);
      throw error;
    }
    giveBack(current);
  };
}
