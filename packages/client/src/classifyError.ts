import { type IdempotencyStatus, parseRetryAfter } from '@idem/core';
import { isTRPCClientError, type TRPCClientError } from '@trpc/client';
import type { AnyRouter } from '@trpc/server';
import { getHTTPStatusCode } from '@trpc/server/http';
import { type TRPC_ERROR_CODE_NUMBER, TRPC_ERROR_CODES_BY_NUMBER } from '@trpc/server/rpc';

/**
 * What one failed attempt tells the retry link.
 *
 * - `no-response`: the request may or may not have reached the server and run (a network
 *   error, a reset connection, a reply that could not be read). Only a key makes
 *   retrying a write safe here.
 * - `response`: the server (or a proxy) answered with an error, `status` says which.
 * - `other`: not a transport failure at all: the caller aborted, a link threw, a key was
 *   invalid. Never retried by default.
 */
export interface AttemptFailure {
  outcome: 'no-response' | 'response' | 'other';
  /** The HTTP status of this operation's error, when known. */
  status: number | undefined;
  /**
   * Set on a 409 that idem's server sent because the key is busy, which a retry with the
   * same key cures: `'in-progress'` (another request with this key is still running) or
   * `'lease-lost'` (this attempt was taken over by another one, which now owns the key).
   * `undefined` for every other error, including the procedure's own CONFLICTs.
   */
  idempotencyStatus: IdempotencyStatus | undefined;
  /** The server's `Retry-After` (or idem's `retryAfterMs`), in ms from now, when given. */
  retryAfterMs: number | undefined;
  /** Whether the default policy retries this failure. */
  transient: boolean;
}

/** `error.data.idempotency.code` values of idem's 409s, by status. */
const STATUS_BY_IDEMPOTENCY_CODE: Readonly<Record<string, IdempotencyStatus>> = {
  REQUEST_IN_PROGRESS: 'in-progress',
  LEASE_LOST: 'lease-lost',
};

/**
 * `error.data.idempotency.code` values of idem's 500s that no retry cures: the server's setup
 * is wrong (idem's tables missing, `idempotent()` on a query, …) and nothing ran, so the
 * call fails at once instead of retrying until the deadline.
 */
const SETUP_IDEMPOTENCY_CODES: ReadonlySet<string> = new Set(['INVALID_CONFIGURATION']);

/** 409 is transient only when it is idem's busy-key answer; see `classifyError`. */
const TRANSIENT_STATUSES: ReadonlySet<number> = new Set([408, 425, 429, 500, 502, 503, 504]);

/**
 * What `fetch` rejects with when the network fails: a `TypeError` (WHATWG Fetch, "network
 * error") whose message each runtime words its own way. Other `TypeError`s (a bug in a
 * `headers` callback, an invalid URL or header value) are not network failures.
 */
const FETCH_NETWORK_ERROR_MESSAGES: ReadonlySet<string> = new Set([
  'fetch failed', // Node.js (undici), with the socket error as `cause`
  'Failed to fetch', // Chromium
  'NetworkError when attempting to fetch resource.', // Firefox
  'Load failed', // Safari
  'Network request failed', // React Native, whatwg-fetch
]);

/**
 * `error.code`s that mean the request got no reply: Node's socket and DNS errors, and
 * undici's (the `cause` of Node's `fetch failed`, or thrown by undici's own `fetch`).
 */
const NETWORK_ERROR_CODES: ReadonlySet<string> = new Set([
  'ECONNRESET',
  'ECONNREFUSED',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ENETDOWN',
  'ENETUNREACH',
  'EHOSTDOWN',
  'EHOSTUNREACH',
  'UND_ERR_SOCKET',
  'UND_ERR_CLOSED',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
]);

/**
 * Reads a failed attempt the way httpLink and httpBatchLink report it: a
 * `TRPCClientError` whose `shape` / `data` hold the server's error and whose
 * `meta.response` is the HTTP response (absent when no response arrived). Anything else
 * (a bare error a link threw, a `RetryBudgetExhaustedError`) is read through its `cause`
 * chain for a transport failure.
 *
 * The status comes from the operation's own error, as tRPC's `getHTTPStatusCode` reads it
 * on the server (`data.httpStatus`, then the JSON-RPC code), before the response's status,
 * because a batch response's status is 207 when its operations failed differently. For
 * the same reason a batch-wide `Idempotency-Status: in-progress` header only counts for an
 * operation whose own error is a 409. A 500 whose `data.idempotency.code` is
 * `INVALID_CONFIGURATION` (idem's error formatter) is not transient: the server is set up
 * wrong, and retrying cannot change that.
 */
export function classifyError(error: unknown, nowMs: number = Date.now()): AttemptFailure {
  const clientError = isTRPCClientError<AnyRouter>(error) ? error : undefined;
  const response = recordOf(field(clientError?.meta, 'response'));
  if (clientError === undefined || (recordOf(clientError.shape) === undefined && !response)) {
    const outcome = isNoResponseError(error) ? 'no-response' : 'other';
    return {
      outcome,
      status: undefined,
      idempotencyStatus: undefined,
      retryAfterMs: undefined,
      transient: outcome === 'no-response',
    };
  }

  const status = statusOf(clientError, response);
  const idempotency = recordOf(field(clientError.data, 'idempotency'));
  const idempotencyStatus = status === 409 ? idempotencyStatusOf(idempotency, response) : undefined;

  const retryAfterMs = retryAfterOf(idempotency, response, nowMs);
  const code = field(idempotency, 'code');
  const transient =
    status !== undefined &&
    !(typeof code === 'string' && SETUP_IDEMPOTENCY_CODES.has(code)) &&
    (TRANSIENT_STATUSES.has(status) || (status === 409 && idempotencyStatus !== undefined));
  return { outcome: 'response', status, idempotencyStatus, retryAfterMs, transient };
}

/**
 * The operation's HTTP status: what tRPC's server sends for its error (`getHTTPStatusCode`
 * reads `data.httpStatus`, then maps the JSON-RPC code, so a formatter that dropped
 * `data.httpStatus` still gives 4xx codes their status and every 5xx 500, as the server
 * itself then answers). A code tRPC does not define, or no error shape at all (a proxy's
 * JSON error), leaves the response's own status.
 */
function statusOf(
  error: TRPCClientError<AnyRouter>,
  response: Record<string, unknown> | undefined,
): number | undefined {
  const shape = recordOf(error.shape);
  const data = recordOf(error.data) ?? {};
  const code = field(shape, 'code');
  if (isTRPCErrorCode(code) || (shape && typeof data.httpStatus === 'number')) {
    return getHTTPStatusCode({
      id: null,
      error: {
        code: code as TRPC_ERROR_CODE_NUMBER,
        message: String(field(shape, 'message')),
        data,
      },
    });
  }
  const responseStatus = field(response, 'status');
  // A 2xx (207 for a mixed batch) says nothing about this operation's own error.
  if (typeof responseStatus === 'number' && responseStatus >= 400) return responseStatus;
  return undefined;
}

function isTRPCErrorCode(code: unknown): code is TRPC_ERROR_CODE_NUMBER {
  return typeof code === 'number' && code in TRPC_ERROR_CODES_BY_NUMBER;
}

/**
 * Which of idem's 409s this is, from (in order of trust) the operation's own
 * `data.idempotency.code` (needs idem's error formatter), the single-call
 * `Idempotency-Status` header, or the batch's `Idempotency-Status-Batch` header. The batch
 * header is keyed by batch index, which a link cannot see for its operation, so an
 * operation whose own error is a 409 counts as busy when any operation of its batch is:
 * at worst a procedure's own CONFLICT is retried, which a keyed call or a query survives.
 */
function idempotencyStatusOf(
  idempotency: Record<string, unknown> | undefined,
  response: Record<string, unknown> | undefined,
): IdempotencyStatus | undefined {
  const code = field(idempotency, 'code');
  if (typeof code === 'string' && code in STATUS_BY_IDEMPOTENCY_CODE) {
    return STATUS_BY_IDEMPOTENCY_CODE[code];
  }
  const single = asIdempotencyStatus(headerOf(response, 'idempotency-status'));
  if (single !== undefined) return single;
  const batch = headerOf(response, 'idempotency-status-batch');
  if (batch === null) return undefined;
  let statuses: unknown;
  try {
    statuses = JSON.parse(batch);
  } catch {
    return undefined;
  }
  const values = recordOf(statuses) ? Object.values(statuses as object) : [];
  const found = values.map(asIdempotencyStatus);
  return found.includes('in-progress') ? 'in-progress' : found.find((value) => value !== undefined);
}

function asIdempotencyStatus(value: unknown): IdempotencyStatus | undefined {
  if (typeof value !== 'string') return undefined;
  const normalized = value.trim().toLowerCase();
  return normalized === 'in-progress' || normalized === 'lease-lost' ? normalized : undefined;
}

function retryAfterOf(
  idempotency: Record<string, unknown> | undefined,
  response: Record<string, unknown> | undefined,
  nowMs: number,
): number | undefined {
  // idem's own field is per operation and in milliseconds; the header is per response
  // (shared by a whole batch) and in whole seconds, so it comes second.
  const fromData = field(idempotency, 'retryAfterMs');
  if (typeof fromData === 'number' && Number.isFinite(fromData) && fromData >= 0) return fromData;
  return parseRetryAfter(headerOf(response, 'retry-after'), nowMs);
}

/**
 * Whether the request got no usable reply. httpLink wraps what `fetch` threw
 * (TRPCClientError → cause), and keyedRetryLink wraps the last failure of a call it gave
 * up on (TRPCClientError → RetryBudgetExhaustedError → that failure), so this walks the
 * `cause` chain (a few levels: a chain can be cyclic) and answers for the first level
 * that is a transport failure:
 *
 * - `fetch`'s network error (`TypeError` with the runtime's network-failure message);
 * - an error whose `code` is a socket, DNS or undici error (`ECONNRESET`, `UND_ERR_SOCKET`…);
 * - a `TimeoutError`: keyedRetryLink's own `attemptTimeoutMs`, or `AbortSignal.timeout()`
 *   in a custom `fetch`;
 * - a `SyntaxError` thrown by the runtime while parsing a reply's body, in practice a
 *   proxy's HTML 502/503/504 page, whose status httpLink does not expose.
 *
 * Anything else (a `TypeError` or `SyntaxError` thrown by the app's own code, say a bug in
 * a `headers` callback) is not a transport failure and is never retried by default.
 */
function isNoResponseError(error: unknown): boolean {
  let current: unknown = error;
  for (let depth = 0; depth < 8 && current !== undefined && current !== null; depth++) {
    const name = field(current, 'name');
    const code = field(current, 'code');
    if (name === 'TimeoutError') return true;
    if (
      name === 'TypeError' &&
      FETCH_NETWORK_ERROR_MESSAGES.has(String(field(current, 'message')))
    ) {
      return true;
    }
    if (typeof code === 'string' && NETWORK_ERROR_CODES.has(code)) return true;
    if (name === 'SyntaxError') return !isThrownByScript(field(current, 'stack'));
    current = field(current, 'cause');
  }
  return false;
}

/**
 * Whether an error's stack shows script code (the app's, a library's) calling the
 * function that threw, rather than the runtime. `Response.json()` parses inside the
 * runtime: on Node the frame below `JSON.parse` is `node:internal/…` (undici), in browsers
 * there is none; an app's `JSON.parse(…)` has its own file below it.
 */
function isThrownByScript(stack: unknown): boolean {
  if (typeof stack !== 'string') return false;
  const lines = stack.split('\n');
  // V8 frames read "    at fn (location)"; SpiderMonkey's and JavaScriptCore's "fn@location".
  const v8Frames = lines.filter((line) => /^\s+at /.test(line));
  const frames = v8Frames.length > 0 ? v8Frames : lines.filter((line) => line.includes('@'));
  const caller = frames.find(
    (line) => !/<anonymous>|\[native code\]|^\s*at (async )?JSON\.parse/.test(line),
  );
  if (caller === undefined) return false;
  return !/[(\s@]node:/.test(caller);
}

function headerOf(response: Record<string, unknown> | undefined, name: string): string | null {
  const headers = field(response, 'headers');
  const get = field(headers, 'get');
  if (typeof get !== 'function') return null;
  const value: unknown = get.call(headers, name);
  return typeof value === 'string' ? value : null;
}

function field(value: unknown, name: string): unknown {
  return typeof value === 'object' && value !== null
    ? (value as Record<string, unknown>)[name]
    : undefined;
}

function recordOf(value: unknown): Record<string, unknown> | undefined {
  return typeof value === 'object' && value !== null
    ? (value as Record<string, unknown>)
    : undefined;
}
