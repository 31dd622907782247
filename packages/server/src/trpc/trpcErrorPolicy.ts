import {
  defaultErrorPolicy,
  type ErrorDecision,
  type ErrorPolicy,
  type JsonValue,
  type Serializer,
  type StoredError,
} from '@idem/core';
import { type TRPC_ERROR_CODE_KEY, TRPCError } from '@trpc/server';

/**
 * What the default policy does with each tRPC code. Typed as a complete record, so a code
 * added to tRPC fails the build until someone decides it.
 */
const DECISIONS = {
  // The request itself is wrong or the business said no: the same request gets the same
  // answer, so it is stored and replayed.
  PARSE_ERROR: 'store',
  BAD_REQUEST: 'store',
  PAYMENT_REQUIRED: 'store',
  FORBIDDEN: 'store',
  NOT_FOUND: 'store',
  METHOD_NOT_SUPPORTED: 'store',
  CONFLICT: 'store',
  PRECONDITION_FAILED: 'store',
  PAYLOAD_TOO_LARGE: 'store',
  UNSUPPORTED_MEDIA_TYPE: 'store',
  UNPROCESSABLE_CONTENT: 'store',
  // About credentials, timing or load, not the request: a retry may well succeed.
  UNAUTHORIZED: 'release',
  TIMEOUT: 'release',
  PRECONDITION_REQUIRED: 'release',
  TOO_MANY_REQUESTS: 'release',
  CLIENT_CLOSED_REQUEST: 'release',
  INTERNAL_SERVER_ERROR: 'release',
  NOT_IMPLEMENTED: 'release',
  BAD_GATEWAY: 'release',
  SERVICE_UNAVAILABLE: 'release',
  GATEWAY_TIMEOUT: 'release',
} as const satisfies Record<TRPC_ERROR_CODE_KEY, ErrorDecision>;

/** Properties rebuilt from their own stored fields, or never copied (`__proto__`). */
const ERROR_FIELDS = new Set(['name', 'message', 'cause', 'stack', '__proto__']);
const TRPC_ERROR_FIELDS = new Set([...ERROR_FIELDS, 'code']);

/** The cause of a stored error, as kept: enough for an error formatter to read it again. */
interface StoredCause {
  name: string;
  message: string;
  /** The cause's own enumerable properties (those the serializer could keep). */
  fields: Record<string, unknown>;
}

interface StoredDetails {
  /** Own enumerable properties of the `TRPCError` itself (a subclass's extra fields). */
  fields?: Record<string, unknown>;
  cause?: StoredCause;
}

/**
 * The error policy of `idempotent()`: which failures of a mutation are stored and
 * replayed, and which release the key so that a retry runs the mutation again.
 *
 * The procedure's failure arrives as a `TRPCError` (tRPC wraps any other exception in an
 * `INTERNAL_SERVER_ERROR` whose `cause` is the original), and is decided by its code:
 *
 * | tRPC code | HTTP | decision |
 * |---|---|---|
 * | `PARSE_ERROR` | 400 | store |
 * | `BAD_REQUEST` | 400 | store |
 * | `PAYMENT_REQUIRED` | 402 | store |
 * | `FORBIDDEN` | 403 | store |
 * | `NOT_FOUND` | 404 | store |
 * | `METHOD_NOT_SUPPORTED` | 405 | store |
 * | `CONFLICT` | 409 | store |
 * | `PRECONDITION_FAILED` | 412 | store |
 * | `PAYLOAD_TOO_LARGE` | 413 | store |
 * | `UNSUPPORTED_MEDIA_TYPE` | 415 | store |
 * | `UNPROCESSABLE_CONTENT` | 422 | store |
 * | `UNAUTHORIZED` | 401 | release (credentials can be refreshed) |
 * | `TIMEOUT` | 408 | release |
 * | `PRECONDITION_REQUIRED` | 428 | release (the client can add the precondition) |
 * | `TOO_MANY_REQUESTS` | 429 | release |
 * | `CLIENT_CLOSED_REQUEST` | 499 | release |
 * | `INTERNAL_SERVER_ERROR` | 500 | release, unless its `cause` is a non-tRPC exception that core's rule stores (below) |
 * | `NOT_IMPLEMENTED` | 501 | release |
 * | `BAD_GATEWAY` | 502 | release |
 * | `SERVICE_UNAVAILABLE` | 503 | release |
 * | `GATEWAY_TIMEOUT` | 504 | release |
 *
 * A non-tRPC exception (which tRPC wraps in `INTERNAL_SERVER_ERROR`, with the exception as
 * `cause`) is decided by core's `defaultErrorPolicy`: `retryable: false`, or a `status`
 * (`statusCode`, `httpStatus`) of 400–499 other than 401, 408, 425, 429 and 499, is stored;
 * `retryable: true`, another status, or none at all (a plain `Error`) is released.
 *
 * A stored error replays as a `TRPCError` with the same code and message; its `cause`
 * comes back as an `Error` with the same `name`, `message` and own enumerable fields (as
 * far as the serializer can keep them), and so do a `TRPCError` subclass's own fields.
 * An error formatter that reads fields (`error.cause.declineCode`) therefore produces the
 * same `data` on replay; one that tests `instanceof` does not, since classes are not
 * stored: test a field or `name` instead, or pass your own `fromStored`.
 *
 * Change decisions per error with `errorPolicy: (error) => 'store' | 'release'` (the rest
 * of this policy is kept), or replace parts with `errorPolicy: { classify, toStored, fromStored }`.
 */
export const trpcErrorPolicy: ErrorPolicy = {
  classify(error) {
    if (!isTRPCErrorLike(error)) return defaultErrorPolicy.classify(error);
    // tRPC wraps any other exception in INTERNAL_SERVER_ERROR: the exception decides, by
    // core's rule (`retryable`, an HTTP `status`), as it would without tRPC.
    if (error.code === 'INTERNAL_SERVER_ERROR' && error.cause && !isTRPCErrorLike(error.cause)) {
      return defaultErrorPolicy.classify(error.cause);
    }
    return DECISIONS[error.code as TRPC_ERROR_CODE_KEY] ?? 'release';
  },

  toStored(error, serializer) {
    const trpcError = isTRPCErrorLike(error) ? error : undefined;
    const code = trpcError && isCode(trpcError.code) ? trpcError.code : 'INTERNAL_SERVER_ERROR';
    const message =
      error instanceof Error ? error.message : typeof error === 'string' ? error : String(error);
    const details: StoredDetails = {};
    if (error !== null && typeof error === 'object') {
      const fields = ownFields(error, serializer, TRPC_ERROR_FIELDS);
      if (Object.keys(fields).length > 0) details.fields = fields;
    }
    const cause = trpcError ? trpcError.cause : undefined;
    if (cause !== undefined && cause !== null) {
      details.cause = {
        name: typeof cause.name === 'string' ? cause.name : 'Error',
        message: typeof cause.message === 'string' ? cause.message : '',
        fields: ownFields(cause, serializer, ERROR_FIELDS),
      };
    }
    const stored: StoredError = { name: 'TRPCError', code, message };
    if (details.fields || details.cause) {
      stored.data = serializer.serialize(details) as JsonValue;
    }
    return stored;
  },

  fromStored(stored, serializer) {
    const details = (
      stored.data === undefined ? {} : serializer.deserialize(stored.data)
    ) as StoredDetails;
    let cause: Error | undefined;
    if (details.cause) {
      cause = new Error(details.cause.message);
      cause.name = details.cause.name;
      assignFields(cause, details.cause.fields, ERROR_FIELDS);
    }
    const code =
      stored.code !== undefined && isCode(stored.code) ? stored.code : 'INTERNAL_SERVER_ERROR';
    const error = new TRPCError({ code, message: stored.message, cause });
    if (details.fields) assignFields(error, details.fields, TRPC_ERROR_FIELDS);
    return error;
  },
};

/** Copies stored fields back, never the ones the constructor set or `__proto__`. */
function assignFields(target: object, fields: Record<string, unknown>, skip: ReadonlySet<string>) {
  for (const name of Object.keys(fields)) {
    if (!skip.has(name)) (target as Record<string, unknown>)[name] = fields[name];
  }
}

function isCode(code: string): code is TRPC_ERROR_CODE_KEY {
  return Object.hasOwn(DECISIONS, code);
}

/** By shape, not `instanceof`: a bundler may load two copies of `@trpc/server`. */
function isTRPCErrorLike(error: unknown): error is TRPCError {
  return (
    error instanceof Error &&
    error.name === 'TRPCError' &&
    typeof (error as { code?: unknown }).code === 'string'
  );
}

/**
 * The own enumerable fields of `source` that the serializer can keep. A field it cannot
 * keep (a function, a cycle) is left out rather than failing the whole error: the stored
 * error must still replay with its code and message.
 */
function ownFields(
  source: object,
  serializer: Serializer,
  skip: ReadonlySet<string>,
): Record<string, unknown> {
  const fields: Record<string, unknown> = {};
  for (const name of Object.keys(source)) {
    if (skip.has(name)) continue;
    const value = (source as Record<string, unknown>)[name];
    try {
      serializer.serialize(value);
    } catch {
      continue;
    }
    fields[name] = value;
  }
  return fields;
}
