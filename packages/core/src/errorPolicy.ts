import type { JsonValue, StoredError } from './record.js';
import type { Serializer } from './serializer.js';

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
    const fields = (typeof error === 'object' && error !== null ? error : {}) as Record<
      string,
      unknown
    >;
    const stored: StoredError = {
      name: typeof fields.name === 'string' ? fields.name : 'Error',
      message: typeof fields.message === 'string' ? fields.message : String(error),
    };
    if (typeof fields.code === 'string') stored.code = fields.code;
    const status = statusOf(fields);
    const details: Record<string, unknown> = {};
    if (status !== undefined) details.status = status;
    if (fields.data !== undefined) details.data = fields.data;
    if (Object.keys(details).length > 0) stored.data = serializer.serialize(details) as JsonValue;
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

/** Completes a partial policy with the defaults. */
export function resolveErrorPolicy(option: ErrorPolicyOption | undefined): ErrorPolicy {
  if (option === undefined) return defaultErrorPolicy;
  if (typeof option === 'function') return { ...defaultErrorPolicy, classify: option };
  return { ...defaultErrorPolicy, ...option };
}
