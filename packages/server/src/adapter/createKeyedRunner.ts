import {
  type Attempt,
  ConfigurationError,
  createIdempotency,
  type ErrorPolicy,
  type HandlerContext,
  type IdempotencySettings,
  type RunResult,
} from '@idem/core';
import { type IdempotencyStore, notifyObserver } from '@idem/core/store';
import { drizzleStore } from '../postgres/drizzleStore.js';
import { checkTransactionsOn } from '../postgres/nodePostgresClient.js';
import type { PgDatabaseLike } from '../postgres/PgDatabaseLike.js';
import {
  lockWaitMsOf,
  type TransactionCall,
  type TransactionIdempotency,
  transactionMode,
} from '../postgres/transactionMode.js';
import { deferredStore } from './deferredStore.js';
import type { KeyedOptions, Lazy } from './KeyedOptions.js';
import { logStoreError, storeFailure } from './storeFailure.js';

/** One keyed call, as an adapter read it from its transport. */
export type KeyedCall = TransactionCall;

/** The context a handler gets: core's, with `tx` in transaction mode. */
export type KeyedContext = HandlerContext | TransactionIdempotency<PgDatabaseLike>;

/** Runs keyed calls in the mode the options chose; see {@link createKeyedRunner}. */
export interface KeyedRunner {
  readonly mode: 'lease' | 'transaction';
  readonly settings: IdempotencySettings;
  run<T>(
    call: KeyedCall,
    handler: (idempotency: KeyedContext) => Promise<Attempt<T>>,
  ): Promise<RunResult<T>>;
}

/** Where the options put the keys: checked, one of the two modes. */
type KeyedStorage =
  | { mode: 'lease'; store: IdempotencyStore }
  | { mode: 'transaction'; db: () => Promise<PgDatabaseLike> };

/**
 * The kernel every adapter runs on: the options checked once, at start-up (a set that
 * cannot work throws `ConfigurationError` naming `factory`), and one `run` for both modes:
 * `@idem/core`'s engine in lease mode, the Postgres transaction runner in transaction
 * mode. Either way a call ends as a value ({@link RunResult}); an adapter only reads the
 * call from its transport and writes the result back. A store that fails under a call
 * throws: idem's tables missing as a `ConfigurationError` naming `migrate(db)`, anything
 * else as a `StoreFailedError`, told once to `onStoreError` (see {@link storeFailure}).
 */
export function createKeyedRunner(
  options: KeyedOptions & { scope?: unknown },
  config: { factory: string; errorPolicy: ErrorPolicy },
): KeyedRunner {
  const storage = checkKeyedOptions(options, config.factory);
  const {
    mode: _mode,
    store: _store,
    db: _db,
    required: _required,
    onStoreError = logStoreError(config.factory),
    ...engineOptions
  } = options;
  const engine = createIdempotency({
    ...engineOptions,
    store:
      storage.mode === 'lease'
        ? storage.store
        : deferredStore(async () => drizzleStore(await storage.db())),
    errorPolicy: config.errorPolicy,
  });
  const { settings } = engine;
  const { mode } = storage;
  const { onEvent } = options;
  const run: KeyedRunner['run'] =
    storage.mode === 'lease'
      ? (call, handler) => engine.run(call, handler)
      : transactionMode({
          db: storage.db,
          settings,
          lockWaitMs: lockWaitMsOf(settings),
          // Events are built only when someone listens, as the engine builds its own.
          emit: onEvent && ((event) => notifyObserver(onEvent, { ...event, mode: 'transaction' })),
        });
  return {
    mode,
    settings,
    async run(call, handler) {
      try {
        return await run(call, handler);
      } catch (error) {
        throw storeFailure(
          error,
          { scope: call.scope, key: call.key, mode },
          onStoreError,
          _db !== undefined,
        );
      }
    },
  };
}

/**
 * The one check of where keys live: `store` or `db`, not both, not neither; transaction
 * mode on a `db`. A `db` or `store` given as a function is resolved on the first call.
 */
function checkKeyedOptions(
  options: KeyedOptions & { scope?: unknown },
  factory: string,
): KeyedStorage {
  const { store, db } = options;
  if (typeof options.scope !== 'function') {
    throw new ConfigurationError(
      `${factory} needs \`scope\` naming who is calling (tenant/user): without it one ` +
        "caller's key could replay another caller's response.",
    );
  }
  const mode = options.mode ?? 'lease';
  if (mode !== 'lease' && mode !== 'transaction') {
    throw new ConfigurationError(`mode must be 'lease' or 'transaction'; got ${String(mode)}.`);
  }
  if (store && db) throw new ConfigurationError(`${factory} takes \`store\` or \`db\`, not both.`);
  if (mode === 'transaction') {
    if (!db) {
      throw new ConfigurationError(
        "mode 'transaction' needs `db` (a Drizzle Postgres database): the key is claimed and " +
          'completed inside the transaction the work writes through, which a `store` cannot join.',
      );
    }
    // A database given as it is is checked now; one given as a function, on the first call.
    if (typeof db !== 'function') checkTransactionsOn(db, `${factory} in transaction mode`);
    return { mode, db: lazy(db) };
  }
  if (typeof store === 'function') return { mode, store: deferredStore(async () => store()) };
  if (store) return { mode, store };
  if (typeof db === 'function') {
    return { mode, store: deferredStore(async () => drizzleStore(await db())) };
  }
  if (db) return { mode, store: drizzleStore(db) };
  throw new ConfigurationError(
    `${factory} needs \`db\` (a Drizzle Postgres database) or \`store\`.`,
  );
}

/** A {@link Lazy} value as a function that resolves it, once. */
function lazy<T>(value: Lazy<T>): () => Promise<T> {
  if (typeof value !== 'function') return () => Promise.resolve(value);
  let resolving: Promise<T> | undefined;
  return () => {
    resolving ??= Promise.resolve()
      .then(value as () => T | Promise<T>)
      .catch((error: unknown) => {
        resolving = undefined;
        throw error;
      });
    return resolving;
  };
}
