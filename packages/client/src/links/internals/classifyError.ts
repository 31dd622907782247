import { type IdempotencyStatus, parseRetryAfter } from '@idem/core';

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

export type { IdempotencyStatus };

/** `error.data.idempotency.code` values of idem's 409s, by status. */
const STATUS_BY_IDEMPOTENCY_CODE: Readonly<Record<string, IdempotencyStatus>> = {
  REQUEST_IN_PROGRESS: 'in-progress',
  LEASE_LOST: 'lease-lost',
};

/** 409 is transient only when it is idem's busy-key answer; see `classifyError`. */
const TRANSIENT_STATUSES: ReadonlySet<number> = new Set([408, 425, 429, 500, 502, 503, 504]);

/**
 * tRPC error codes (`error.data.code`) to HTTP statuses, as `@trpc/server` maps them
 * (getHTTPStatusCode.ts, 11.22.1). Copied so the client does not import tRPC's
 * "unstable-core-do-not-import" internals; used when an error formatter dropped
 * `data.httpStatus`.
 */
const STATUS_BY_TRPC_CODE: Readonly<Record<string, number>> = {
  PARSE_ERROR: 400,
  BAD_REQUEST: 400,
  UNAUTHORIZED: 401,
  PAYMENT_REQUIRED: 402,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  METHOD_NOT_SUPPORTED: 405,
  TIMEOUT: 408,
  CONFLICT: 409,
  PRECONDITION_FAILED: 412,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  UNPROCESSABLE_CONTENT: 422,
  PRECONDITION_REQUIRED: 428,
  TOO_MANY_REQUESTS: 429,
  CLIENT_CLOSED_REQUEST: 499,
  INTERNAL_SERVER_ERROR: 500,
  NOT_IMPLEMENTED: 501,
  BAD_GATEWAY: 502,
  SERVICE_UNAVAILABLE: 503,
  GATEWAY_TIMEOUT: 504,
};

/**
 * JSON-RPC codes (`error.shape.code`) to HTTP statuses: the last resort when the error
 * carries neither `data.httpStatus` nor `data.code`. All 5xx share -32603, read as 500.
 */
const STATUS_BY_JSON_RPC_CODE: Readonly<Record<number, number>> = {
  [-32700]: 400,
  [-32600]: 400,
  [-32603]: 500,
  [-32001]: 401,
  [-32002]: 402,
  [-32003]: 403,
  [-32004]: 404,
  [-32005]: 405,
  [-32008]: 408,
  [-32009]: 409,
  [-32012]: 412,
  [-32013]: 413,
  [-32015]: 415,
  [-32022]: 422,
  [-32028]: 428,
  [-32029]: 429,
  [-32099]: 499,
};

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
 * `TRPCClientError` whose `data` / `shape` hold the server's error and whose
 * `meta.response` is the HTTP response (absent when no response arrived).
 *
 * The status comes from the operation's own error (`data.httpStatus`, then `data.code`,
 * then `shape.code`) before the response's status, because a batch response's status is
 * 207 when its operations failed differently. For the same reason a batch-wide
 * `Idempotency-Status: in-progress` header only counts for an operation whose own error
 * is a 409.
 */
export function classifyError(error: unknown, nowMs: number = Date.now()): AttemptFailure {
  const data = recordOf(field(error, 'data'));
  const shape = recordOf(field(error, 'shape'));
  const response = recordOf(field(recordOf(field(error, 'meta')), 'response'));

  if (data === undefined && shape === undefined && response === undefined) {
    const outcome = isNoResponseError(error) ? 'no-response' : 'other';
    return {
      outcome,
      status: undefined,
      idempotencyStatus: undefined,
      retryAfterMs: undefined,
      transient: outcome === 'no-response',
    };
  }

  const status = statusOf(data, shape, response);
  const idempotency = recordOf(field(data, 'idempotency'));
  const idempotencyStatus = status === 409 ? idempotencyStatusOf(idempotency, response) : undefined;

  const retryAfterMs = retryAfterOf(idempotency, response, nowMs);
  const transient =
    status !== undefined &&
    (TRANSIENT_STATUSES.has(status) || (status === 409 && idempotencyStatus !== undefined));
  return { outcome: 'response', status, idempotencyStatus, retryAfterMs, transient };
}

/**
 * Whether idem's default policy retries this error: no response / network error, 408,
 * 409 from idem's busy-key answer (in progress, or lease lost to a takeover; not other
 * CONFLICTs), 425, 429, 500, 502, 503 and 504. Never 400, 401, 403, 404 or 422, nor an
 * aborted call.
 *
 * Use it to build a `retryOn` that extends the default:
 * `retryOn: ({ error }) => isTransientError(error) || isMyOwnTransientError(error)`.
 */
export function isTransientError(error: unknown): boolean {
  return classifyError(error).transient;
}

/**
 * Whether a call that failed may still have run, or may run if sent again: it stopped on
 * a transient failure (see `isTransientError`), including when keyedRetryLink gave up on
 * one because its retry budget was empty, its `deadlineMs` passed or its `maxAttempts`
 * were used up. The server may or may not have run it, so this is not "failed": retry
 * later with the SAME idempotency key (idem runs it at most once and replays the
 * outcome), or look the outcome up, before telling the user it did not happen.
 *
 * `false` when the server answered with a decision (a 4xx such as 400, 402, 404, 422: the
 * call did not run, or failed for good), or the caller aborted.
 */
export function isOutcomeUnknown(error: unknown): boolean {
  return classifyError(error).transient;
}

function statusOf(
  data: Record<string, unknown> | undefined,
  shape: Record<string, unknown> | undefined,
  response: Record<string, unknown> | undefined,
): number | undefined {
  const httpStatus = field(data, 'httpStatus');
  if (typeof httpStatus === 'number') return httpStatus;
  const code = field(data, 'code');
  if (typeof code === 'string' && code in STATUS_BY_TRPC_CODE) return STATUS_BY_TRPC_CODE[code];
  const rpcCode = field(shape, 'code');
  if (typeof rpcCode === 'number' && rpcCode in STATUS_BY_JSON_RPC_CODE) {
    return STATUS_BY_JSON_RPC_CODE[rpcCode];
  }
  const responseStatus = field(response, 'status');
  // A 2xx (207 for a mixed batch) says nothing about this operation's own error.
  if (typeof responseStatus === 'number' && responseStatus >= 400) return responseStatus;
  return undefined;
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
