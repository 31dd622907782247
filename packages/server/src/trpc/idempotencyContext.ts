import {
  IDEMPOTENCY_KEY_BATCH_HEADER,
  IDEMPOTENCY_KEY_HEADER,
  IDEMPOTENCY_STATUS_BATCH_HEADER,
  IDEMPOTENCY_STATUS_HEADER,
  IDEMPOTENT_REPLAYED_BATCH_HEADER,
  IDEMPOTENT_REPLAYED_HEADER,
  type IdempotencyStatus,
  InvalidKeyError,
  RETRY_AFTER_HEADER,
  retryAfterSeconds,
} from '@idem/core';
import { parseKeyHeader } from '@idem/core/store';
import { batchKeys } from './batchKeys.js';
import { inputParsersOf } from './inputParsersOf.js';

/** Request headers: a Fetch `Headers`, or Node's `IncomingHttpHeaders` (lower-case names). */
export type RequestHeadersLike =
  | { get(name: string): string | null }
  | Readonly<Record<string, string | readonly string[] | undefined>>;

/**
 * Response headers idem writes to: the fetch adapter's `resHeaders` (a `Headers`), or a
 * Node response (`res` of the standalone adapter, Express, Fastify's `reply.raw`).
 */
export type ResponseHeadersLike =
  | { get(name: string): string | null; set(name: string, value: string): void }
  | { setHeader(name: string, value: string): unknown };

/** Writes one response header, whichever kind of response headers the app passed. */
function setHeader(headers: ResponseHeadersLike, name: string, value: string): void {
  if ('set' in headers) headers.set(name, value);
  else headers.setHeader(name, value);
}

/** For an HTTP request: pass the fetch adapter's `createContext` options as they are. */
export interface IdempotencyHttpContextOptions {
  /**
   * The incoming request; its URL tells a batch (`?batch=1`) when `info` is absent. A Node
   * request's `rawHeaders` (the fields as sent) tell one key field with a comma in it from
   * two fields that HTTP joined; without them such a key is refused.
   */
  req: {
    headers: RequestHeadersLike;
    url?: string | undefined;
    rawHeaders?: readonly string[] | undefined;
  };
  /**
   * Where `Idempotent-Replayed`, `Idempotency-Status` and `Retry-After` go: the fetch
   * adapter's `resHeaders`, or a Node adapter's `res`.
   * @default undefined (no response headers; errors still carry `data.idempotency`)
   */
  resHeaders?: ResponseHeadersLike | undefined;
  /**
   * tRPC's request info; `info.isBatchCall` is the surest way to tell a batch, and
   * `info.calls` names each call's procedure, whose input parsers tell whether a call with
   * an unreadable or invalid input would ever reach it (if not, nothing is stored).
   * @default undefined (the batch flag is read from `req.url`; an unreadable body is refused)
   */
  info?: RequestInfoLike | undefined;
}

/** The part of tRPC's `TRPCRequestInfo` that idem reads. */
export interface RequestInfoLike {
  isBatchCall: boolean;
  /** tRPC's procedure of each call of the request (`TRPCRequestInfo['calls'][i].procedure`). */
  calls?: readonly { procedure?: object | null }[];
}

/** For a server-side call through `createCaller`: the key itself, no HTTP. */
export interface IdempotencyCallerContextOptions {
  /** The call's idempotency key; `undefined` means the call carries none. */
  key: string | undefined;
  /**
   * Receives the same response headers an HTTP call would get, if you want to look.
   * @default undefined
   */
  resHeaders?: ResponseHeadersLike | undefined;
}

/**
 * What `idempotent()` needs from one request: the key of each call and a place to say
 * how each call was answered. Made by {@link idempotencyContext}; apps only pass it along.
 */
export interface IdempotencyRequest {
  /**
   * The key sent for the call at `batchIndex`, unvalidated, or `undefined` when there is
   * none; `Idempotency-Key: "abc"` (a Structured Field string) and `Idempotency-Key: abc`
   * both give `abc`. Throws `InvalidKeyError` (reason `malformed_header`) when the
   * request's headers do not follow the wire format (a batch header on a single call, or
   * the reverse, a malformed batch, more than one key field, a broken quoted string).
   */
  keyOf(batchIndex: number): string | undefined;
  /**
   * The input parsers of the procedure called at `batchIndex` (tRPC's
   * `procedure._def.inputs`), or `undefined` when the request does not say (no `info`).
   */
  inputParsersOf?(batchIndex: number): readonly unknown[] | undefined;
  /** Marks the call at `batchIndex` as answered from the store: `Idempotent-Replayed` (or its batch form). */
  markReplayed(batchIndex: number): void;
  /**
   * Marks the call at `batchIndex` as refused with a 409 that a later retry may cure:
   * `Idempotency-Status` (or its batch form) and `Retry-After`.
   */
  markBusy(batchIndex: number, status: IdempotencyStatus, retryAfterMs: number): void;
}

/** The context property `idempotent()` reads; spread {@link idempotencyContext} into yours. */
export interface IdempotencyRequestContext {
  idempotencyRequest: IdempotencyRequest;
}

/**
 * Puts what `idempotent()` needs into your tRPC context. Spread the result into the
 * object your `createContext` returns.
 *
 * Over HTTP (fetch adapter; the node adapters work too, with `req` only):
 *
 * ```ts
 * fetchRequestHandler({
 *   endpoint: '/trpc', req, router,
 *   createContext: (opts) => ({ ...idempotencyContext(opts), user: await auth(opts.req) }),
 * });
 * ```
 *
 * Server-side, through `createCaller` (one context per call: the key belongs to one call):
 *
 * ```ts
 * const caller = createCaller({ ...idempotencyContext({ key: crypto.randomUUID() }), user });
 * await caller.orders.create(input);
 * ```
 *
 * The wire format is documented on `IDEMPOTENCY_KEY_HEADER`: `Idempotency-Key: <key>` on a
 * single call, `Idempotency-Key-Batch: {"<batchIndex>":"<key>",…}` on a batch.
 */
export function idempotencyContext(
  options: IdempotencyHttpContextOptions | IdempotencyCallerContextOptions,
): IdempotencyRequestContext {
  const responseHeaders = options.resHeaders;
  const batch = 'req' in options && isBatch(options);
  const keyOf = 'req' in options ? httpKeys(options.req, batch) : () => options.key;
  const replayedIndices = new Set<number>();
  const statuses = new Map<number, IdempotencyStatus>();
  let longestRetryAfterSeconds = -1;

  const calls = 'req' in options ? options.info?.calls : undefined;
  return {
    idempotencyRequest: {
      keyOf,
      inputParsersOf: (batchIndex) => inputParsersOf(calls?.[batchIndex]?.procedure),
      markReplayed(batchIndex) {
        if (!responseHeaders) return;
        if (!batch) {
          setHeader(responseHeaders, IDEMPOTENT_REPLAYED_HEADER, 'true');
          return;
        }
        replayedIndices.add(batchIndex);
        const sorted = [...replayedIndices].sort((a, b) => a - b);
        setHeader(responseHeaders, IDEMPOTENT_REPLAYED_BATCH_HEADER, JSON.stringify(sorted));
      },
      markBusy(batchIndex, status, retryAfterMs) {
        if (!responseHeaders) return;
        // The longest wait of any call: retrying sooner would only meet the same answer.
        longestRetryAfterSeconds = Math.max(
          longestRetryAfterSeconds,
          retryAfterSeconds(retryAfterMs),
        );
        setHeader(responseHeaders, RETRY_AFTER_HEADER, String(longestRetryAfterSeconds));
        if (!batch) {
          setHeader(responseHeaders, IDEMPOTENCY_STATUS_HEADER, status);
          return;
        }
        statuses.set(batchIndex, status);
        setHeader(
          responseHeaders,
          IDEMPOTENCY_STATUS_BATCH_HEADER,
          JSON.stringify(Object.fromEntries([...statuses].sort(([a], [b]) => a - b))),
        );
      },
    },
  };
}

function isBatch(options: IdempotencyHttpContextOptions): boolean {
  if (options.info) return options.info.isBatchCall;
  const url = options.req.url;
  if (url === undefined) return false;
  try {
    return new URL(url, 'http://localhost').searchParams.get('batch') === '1';
  } catch {
    return false;
  }
}

function header(headers: RequestHeadersLike, name: string): string | undefined {
  if (typeof headers.get === 'function') {
    return (headers as { get(name: string): string | null }).get(name) ?? undefined;
  }
  const value = (headers as Readonly<Record<string, string | readonly string[] | undefined>>)[
    name.toLowerCase()
  ];
  return typeof value === 'string' || value === undefined ? value : value.join(', ');
}

/** How many fields named `name` the request carried, where its raw field list is known. */
function fieldCount(rawHeaders: readonly string[] | undefined, name: string): number | undefined {
  if (!Array.isArray(rawHeaders)) return undefined;
  let count = 0;
  for (let index = 0; index < rawHeaders.length; index += 2) {
    if (rawHeaders[index]?.toLowerCase() === name) count++;
  }
  return count;
}

function httpKeys(
  req: IdempotencyHttpContextOptions['req'],
  batch: boolean,
): (batchIndex: number) => string | undefined {
  const { headers, rawHeaders } = req;
  const single = header(headers, IDEMPOTENCY_KEY_HEADER);
  const batchHeader = header(headers, IDEMPOTENCY_KEY_BATCH_HEADER);
  if (!batch) {
    return () => {
      if (single === undefined && batchHeader !== undefined) {
        throw new InvalidKeyError(
          'malformed_header',
          `${IDEMPOTENCY_KEY_BATCH_HEADER} is for batch requests (?batch=1); a single call ` +
            `carries its key in ${IDEMPOTENCY_KEY_HEADER}.`,
        );
      }
      // Parsed on use, so that a malformed key fails only procedures that read it.
      if (single === undefined) return undefined;
      return parseKeyHeader(single, {
        fieldCount: fieldCount(rawHeaders, IDEMPOTENCY_KEY_HEADER.toLowerCase()),
      });
    };
  }
  // Parsed once per request, on first use: a batch without idempotent calls never pays.
  let keys: ReadonlyMap<number, string> | undefined;
  return (batchIndex) => {
    if (single !== undefined) {
      throw new InvalidKeyError(
        'malformed_header',
        `A batch request (?batch=1) carries its keys in ${IDEMPOTENCY_KEY_BATCH_HEADER}, one per ` +
          `operation by batch index, not in ${IDEMPOTENCY_KEY_HEADER}.`,
      );
    }
    if (batchHeader === undefined) return undefined;
    keys ??= batchKeys(batchHeader, {
      fieldCount: fieldCount(rawHeaders, IDEMPOTENCY_KEY_BATCH_HEADER.toLowerCase()),
    });
    return keys.get(batchIndex);
  };
}
