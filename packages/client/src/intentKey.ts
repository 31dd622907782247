import { type Clock, ConfigurationError, systemClock } from '@idem/core';
import { createKey } from './createKey.js';

/** The part of the Web Storage API an intent key needs: `localStorage` fits, so does a Map wrapper. */
export type IntentStorage = Pick<Storage, 'getItem' | 'setItem' | 'removeItem'> &
  Partial<Pick<Storage, 'key' | 'length'>>;

export interface IntentKeyOptions {
  /**
   * What the key names: one user intent, e.g. `cart:${cartId}:${cartVersion}` or
   * `invoice:${invoiceId}`. Another intent (another cart, a changed request) is another
   * key. 1–200 characters.
   */
  intent: string;
  /**
   * Where the key is kept:
   * - `'local'`: `localStorage`, shared by every tab of the origin and kept across
   *   restarts: a reload, Back or a second tab on the same intent reuses the key;
   * - `'session'`: `sessionStorage`, this tab only (kept across reloads and Back; a
   *   duplicated tab starts with a copy);
   * - any object with `getItem`, `setItem` and `removeItem`.
   * @default 'local'
   */
  storage?: 'local' | 'session' | IntentStorage | undefined;
  /**
   * How long a key lives after it was created; past that, `get()` makes a new one. Keep it
   * at most the server's `ttlMs` (how long it replays a completed key), so that a reused
   * key always finds its stored outcome rather than running again.
   * @default 86_400_000 (24 h, the server's default ttlMs)
   */
  ttlMs?: number | undefined;
  /** Wall-clock time for the expiry (it must hold across page loads). For tests. @default systemClock */
  clock?: Pick<Clock, 'now'> | undefined;
}

/** One intent's persisted idempotency key. Nothing touches storage until a method runs. */
export interface IntentKey {
  readonly intent: string;
  /** The intent's key: the stored one while it lives, otherwise a new one, stored. */
  get(): string;
  /** The stored key if there is a live one, without creating one. */
  peek(): string | undefined;
  /** The intent is over (paid, cancelled, a definitive error): forget its key. */
  settle(): void;
  /** Calls `listener` when the key changes, in this tab or (for `'local'`) another one. */
  subscribe(listener: () => void): () => void;
}

/** Prefix of every stored entry, so expired ones can be found and removed. */
export const INTENT_KEY_PREFIX = 'idem:intent:';
const MAX_INTENT_LENGTH = 200;
const DEFAULT_TTL_MS = 86_400_000;

interface Entry {
  key: string;
  expiresAt: number;
}

/** Listeners per storage entry, so that `settle()` in one component reaches the others. */
const listenersByName = new Map<string, Set<() => void>>();
/** Where keys go when the browser refuses storage (blocked cookies, some private modes). */
const pageMemory = new Map<string, string>();
const memoryStorage: IntentStorage = {
  getItem: (name) => pageMemory.get(name) ?? null,
  setItem: (name, value) => void pageMemory.set(name, value),
  removeItem: (name) => void pageMemory.delete(name),
};

/**
 * An idempotency key bound to a user intent and kept in Web Storage, so that the retry a
 * person makes by hand (a reload, Back, a second tab) sends the key of the first attempt
 * and the server replays its outcome instead of running the work again.
 *
 * Two tabs that create the key for one intent at the very same moment may each store one
 * (Web Storage has no compare-and-set); for a guarantee across tabs and devices, create the
 * intent on the server and derive the key from its id there.
 */
export function intentKey(options: IntentKeyOptions): IntentKey {
  const { intent, ttlMs, storage: storageOption, clock } = checkedOptions(options);
  const name = `${INTENT_KEY_PREFIX}${intent}`;
  const storage = storageOf(storageOption);

  const peek = (): string | undefined => {
    // A key this page kept in memory, because the storage refused to write it, is the one
    // this page already sent: it comes first, or the next get() would mint another.
    const now = clock.now();
    for (const raw of [memoryStorage.getItem(name), readItem(storage(), name)]) {
      const entry = parse(raw);
      if (entry && entry.expiresAt > now) return entry.key;
    }
    return undefined;
  };

  return {
    intent,
    peek,
    get() {
      const live = peek();
      if (live !== undefined) return live;
      const target = storage();
      const entry: Entry = { key: createKey(), expiresAt: clock.now() + ttlMs };
      try {
        removeExpired(target, clock.now());
        target.setItem(name, JSON.stringify(entry));
      } catch {
        // Storage full or refused: the key still holds for this page (peek() reads it).
        memoryStorage.setItem(name, JSON.stringify(entry));
      }
      // Later, not now: get() runs while React renders, and a listener must not update
      // another component in the middle of that.
      queueMicrotask(() => notify(name));
      return entry.key;
    },
    settle() {
      const target = storage();
      memoryStorage.removeItem(name);
      try {
        target.removeItem(name);
      } catch {
        // A storage that refuses even this keeps the old entry: a later get() reuses the
        // settled key, which the server answers from its stored outcome (never twice).
      }
      notify(name);
    },
    subscribe: (listener) => subscribeToEntry(name, listener),
  };
}

/** The options with their defaults, or a `ConfigurationError` for one out of range. */
function checkedOptions(options: IntentKeyOptions) {
  const { intent } = options;
  if (typeof intent !== 'string' || intent.length === 0 || intent.length > MAX_INTENT_LENGTH) {
    throw new ConfigurationError(
      `intentKey(): \`intent\` must be a string of 1–${MAX_INTENT_LENGTH} characters naming ` +
        `the intent (e.g. \`cart:\${cartId}\`); got ${typeof intent === 'string' ? `${intent.length} characters` : typeof intent}.`,
    );
  }
  const ttlMs = options.ttlMs ?? DEFAULT_TTL_MS;
  if (!Number.isFinite(ttlMs) || ttlMs <= 0) {
    throw new ConfigurationError(
      `intentKey(): \`ttlMs\` must be a positive number of milliseconds; got ${String(ttlMs)}.`,
    );
  }
  const storage = options.storage ?? 'local';
  if (storage !== 'local' && storage !== 'session' && !isStorage(storage)) {
    throw new ConfigurationError(
      "intentKey(): `storage` must be 'local', 'session' or an object with getItem, setItem and removeItem.",
    );
  }
  return { intent, ttlMs, storage, clock: options.clock ?? systemClock };
}

/**
 * Where the key is kept, looked up on each use (so nothing touches storage until a method
 * runs): the given object, or the browser's storage of that kind, or this page's memory
 * where the browser refuses storage.
 */
function storageOf(option: 'local' | 'session' | IntentStorage): () => IntentStorage {
  return () => {
    if (typeof option === 'object') return option;
    if (typeof window === 'undefined') {
      throw new ConfigurationError(
        `intentKey(): ${option}Storage exists only in a browser. On the server, derive ` +
          'the key from the call instead, or pass a `storage` object.',
      );
    }
    return browserStorage(option) ?? memoryStorage;
  };
}

/** Calls `listener` when the entry `name` changes, in this tab or (for `'local'`) another one. */
function subscribeToEntry(name: string, listener: () => void): () => void {
  const listeners = listenersByName.get(name) ?? new Set();
  listenersByName.set(name, listeners);
  listeners.add(listener);
  // Another tab's change arrives as a `storage` event (never in the tab that made it).
  const onStorage = (event: StorageEvent) => {
    if (event.key === name || event.key === null) listener();
  };
  const target = typeof window === 'undefined' ? undefined : window;
  target?.addEventListener('storage', onStorage);
  return () => {
    listeners.delete(listener);
    if (listeners.size === 0) listenersByName.delete(name);
    target?.removeEventListener('storage', onStorage);
  };
}

function notify(name: string) {
  for (const listener of listenersByName.get(name) ?? []) listener();
}

function isStorage(value: unknown): value is IntentStorage {
  const candidate = value as Partial<IntentStorage> | null;
  return (
    typeof candidate === 'object' &&
    candidate !== null &&
    typeof candidate.getItem === 'function' &&
    typeof candidate.setItem === 'function' &&
    typeof candidate.removeItem === 'function'
  );
}

/** The browser's storage, or undefined where reading the property itself throws (blocked). */
function browserStorage(kind: 'local' | 'session'): Storage | undefined {
  try {
    return kind === 'local' ? window.localStorage : window.sessionStorage;
  } catch {
    return undefined;
  }
}

/** An entry's text, or null where the storage refuses even to read (treated as no key). */
function readItem(storage: IntentStorage, name: string): string | null {
  try {
    return storage.getItem(name);
  } catch {
    return null;
  }
}

function parse(raw: string | null): Entry | undefined {
  if (!raw) return undefined;
  try {
    const entry = JSON.parse(raw) as Partial<Entry>;
    return typeof entry.key === 'string' && typeof entry.expiresAt === 'number'
      ? (entry as Entry)
      : undefined;
  } catch {
    return undefined;
  }
}

/** Each intent leaves one entry behind: drop the expired ones when a new one is written. */
function removeExpired(storage: IntentStorage, now: number) {
  if (typeof storage.key !== 'function' || typeof storage.length !== 'number') return;
  const expired: string[] = [];
  for (let index = 0; index < storage.length; index++) {
    const name = storage.key(index);
    if (!name?.startsWith(INTENT_KEY_PREFIX)) continue;
    const entry = parse(storage.getItem(name));
    if (!entry || entry.expiresAt <= now) expired.push(name);
  }
  for (const name of expired) storage.removeItem(name);
}
