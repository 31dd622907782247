import { MAX_NESTING, type Serializer } from './serializer.js';
import type { StoredError } from './store/record.js';

/** What happens to a failed attempt's key. */
export type ErrorDecision =
  /** A deterministic failure (the business said no): stored and replayed like a success. */
  | 'store'
  /** A transient failure: the key is released and a retry with it runs the work again. */
  | 'release';

/**
 * Decides, per error, whether a failure is part of the key's outcome, and how a stored
 * failure is written and brought back on replay.
 */
export interface ErrorPolicy {
  classify(error: unknown): ErrorDecision;
  /** The JSON form kept in the store. */
  toStored(error: unknown, serializer: Serializer): StoredError;
  /** The error a replay throws. */
  fromStored(stored: StoredError, serializer: Serializer): unknown;
}

/** Anything you may pass as `errorPolicy`: a whole policy, parts of one, or just `classify`. */
export type ErrorPolicyOption = ((error: unknown) => ErrorDecision) | Partial<ErrorPolicy>;

/** HTTP statuses in the 4xx range that are about timing or credentials, not the request. */
const TRANSIENT_CLIENT_STATUSES = new Set([401, 408, 425, 429, 499]);

const statusOf = (error: Record<string, unknown>): number | undefined => {
  for (const field of ['status', 'statusCode', 'httpStatus'] as const) {
    const value = error[field];
    if (typeof value === 'number' && Number.isInteger(value)) return value;
  }
  return undefined;
};

/** An error rebuilt from the store on replay: same name, message, code, status and data. */
export class ReplayedError extends Error {
  readonly code: string | undefined;
  readonly status: number | undefined;
  readonly data: unknown;

  constructor(stored: StoredError, data: unknown, status: number | undefined) {
    super(stored.message);
    this.name = stored.name;
    this.code = stored.code;
    this.status = status;
    this.data = data;
  }
}

/**
 * The default policy, for errors that know nothing of idem:
 *
 * | error | decision |
 * |---|---|
 * | `retryable: false` | store |
 * | `retryable: true` | release |
 * | `status` / `statusCode` / `httpStatus` 400–499, except 401, 408, 425, 429, 499 | store |
 * | anything else (5xx, timeouts, a lost connection, a plain `Error`) | release |
 *
 * Releasing is the safe side: a retry runs the work again, and recovery points keep
 * finished steps from repeating. The tRPC middleware of `@idem/server` ships its own
 * table keyed by tRPC codes.
 */
export const defaultErrorPolicy: ErrorPolicy = {
  classify(error) {
    if (typeof error !== 'object' || error === null) return 'release';
    const fields = error as Record<string, unknown>;
    if (fields.retryable === false) return 'store';
    if (fields.retryable === true) return 'release';
    const status = statusOf(fields);
    if (status !== undefined && status >= 400 && status < 500) {
      return TRANSIENT_CLIENT_STATUSES.has(status) ? 'release' : 'store';
    }
    return 'release';
  },

  toStored(error, serializer) {
    const stored = basicStoredError(error);
    const fields = fieldsOf(error);
    const status = statusOf(fields);
    const details: Record<string, unknown> = {};
    if (status !== undefined) details.status = status;
    if (fields.data !== undefined) {
      try {
        stored.data = serializer.serialize({ ...details, data: withoutStacks(fields.data) });
        return stored;
      } catch {
        // Data the serializer refuses is dropped: the error must still settle the key and
        // replay with its name, message, code and status.
      }
    }
    if (status !== undefined) stored.data = serializer.serialize(details);
    return stored;
  },

  fromStored(stored, serializer) {
    const details = (stored.data === undefined ? {} : serializer.deserialize(stored.data)) as {
      status?: number;
      data?: unknown;
    };
    return new ReplayedError(stored, details.data, details.status);
  },
};

function fieldsOf(error: unknown): Record<string, unknown> {
  return (typeof error === 'object' && error !== null ? error : {}) as Record<string, unknown>;
}

/** The part of any error every policy can store: `name`, `message` and a string `code`. */
function basicStoredError(error: unknown): StoredError {
  const fields = fieldsOf(error);
  const stored: StoredError = {
    name: typeof fields.name === 'string' ? fields.name : 'Error',
    message: typeof fields.message === 'string' ? fields.message : String(error),
  };
  if (typeof fields.code === 'string') stored.code = fields.code;
  return stored;
}

/**
 * A copy of `value` without `stack` properties at any depth (some libraries' errors put
 * theirs in `toJSON()`): a stored error is replayed to clients, and a stack trace shows
 * them the server's files. Only plain objects, arrays and errors are copied; anything else,
 * a cycle or a value nested too deep is left as it is, for the serializer to judge.
 */
function withoutStacks(value: unknown, ancestors = new Set<object>()): unknown {
  if (typeof value !== 'object' || value === null) return value;
  if (ancestors.has(value) || ancestors.size >= MAX_NESTING) return value;
  const toJSON = (value as { toJSON?: unknown }).toJSON;
  if (typeof toJSON === 'function' && !(value instanceof Date)) {
    return withoutStacks(toJSON.call(value, ''), ancestors);
  }
  const prototype = Object.getPrototypeOf(value);
  const copyable =
    Array.isArray(value) ||
    prototype === Object.prototype ||
    prototype === null ||
    value instanceof Error;
  if (!copyable) return value;
  ancestors.add(value);
  try {
    if (Array.isArray(value)) return value.map((item) => withoutStacks(item, ancestors));
    const copy: Record<string, unknown> = {};
    for (const key of Object.keys(value)) {
      if (key === 'stack') continue;
      // defineProperty: a plain assignment of "__proto__" would set the prototype instead.
      Object.defineProperty(copy, key, {
        value: withoutStacks((value as Record<string, unknown>)[key], ancestors),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
    return copy;
  } finally {
    ancestors.delete(value);
  }
}

/**
 * The stored form of a failure, by `policy`. What the serializer refuses (data with a cycle
 * or a function) is left out rather than failing the store: the error must settle the key,
 * or the key stays locked and then runs again. A policy whose `toStored` throws anyway gets
 * name, message and code stored. `refused` is the first serializer error met, if any.
 */
export function storedErrorOf(
  policy: ErrorPolicy,
  error: unknown,
  serializer: Serializer,
): { stored: StoredError; refused: unknown } {
  let refused: unknown;
  const watched: Serializer = {
    serialize(value) {
      try {
        return serializer.serialize(value);
      } catch (failure) {
        refused ??= failure;
        throw failure;
      }
    },
    deserialize: (json) => serializer.deserialize(json),
  };
  try {
    return { stored: policy.toStored(error, watched), refused };
  } catch (failure) {
    return { stored: basicStoredError(error), refused: refused ?? failure };
  }
}

/**
 * Completes a partial policy with `base` (core's default, or an adapter's own table such
 * as the tRPC middleware's); parts left `undefined` keep the base's.
 */
export function resolveErrorPolicy(
  option: ErrorPolicyOption | undefined,
  base: ErrorPolicy = defaultErrorPolicy,
): ErrorPolicy {
  if (option === undefined) return base;
  if (typeof option === 'function') return { ...base, classify: option };
  return {
    classify: option.classify ?? base.classify,
    toStored: option.toStored ?? base.toStored,
    fromStored: option.fromStored ?? base.fromStored,
  };
}
