import {
  IDEMPOTENCY_KEY_BATCH_HEADER,
  IDEMPOTENCY_KEY_HEADER,
  IDEMPOTENCY_STATUS_BATCH_HEADER,
  IDEMPOTENCY_STATUS_HEADER,
  IDEMPOTENT_REPLAYED_BATCH_HEADER,
  IDEMPOTENT_REPLAYED_HEADER,
  type IdempotencyStatus,
  RETRY_AFTER_HEADER,
} from '@idem/core';
import { TRPCError } from '@trpc/server';
import { batchKeys } from './batchKeys.js';

/** Request headers: a Fetch `Headers`, or Node's `IncomingHttpHeaders` (lower-case names). */
export type RequestHeadersLike =
  | { get(name: string): string | null }
  | Readonly<Record<string, string | readonly string[] | undefined>>;

/** Response headers idem writes to: the fetch adapter's `resHeaders` (a `Headers`). */
export interface ResponseHeadersLike {
  get(name: string): string | null;
  set(name: string, value: string): void;
}

/** For an HTTP request: pass the fetch adapter's `createContext` options as they are. */
export interface IdempotencyHttpContextOptions {
  /** The incoming request; its URL tells a batch (`?batch=1`) when `info` is absent. */
  req: { headers: RequestHeadersLike; url?: string | undefined };
  /**
   * Where `Idempotent-Replayed`, `Idempotency-Status` and `Retry-After` go.
   * @default undefined (no response headers; errors still carry `data.idempotency`)
   */
  resHeaders?: ResponseHeadersLike | undefined;
  /**
   * tRPC's request info; `info.isBatchCall` is the surest way to tell a batch.
   * @default undefined (the batch flag is read from `req.url`)
   */
  info?: { isBatchCall: boolean } | undefined;
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
   * none. Throws `TRPCError` `BAD_REQUEST` when the request's headers do not follow the
   * wire format (a batch header on a single call, or the reverse, or a malformed batch).
   */
  keyOf(batchIndex: number): string | undefined;
  /** The call at `batchIndex` was answered from the store. */
  replayed(batchIndex: number): void;
  /** The call at `batchIndex` was refused with a 409 that a later retry may cure. */
  busy(batchIndex: number, status: IdempotencyStatus, retryAfterMs: number): void;
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
  const keyOf = 'req' in options ? httpKeys(options.req.headers, batch) : () => options.key;
  const replayedIndices = new Set<number>();
  const statuses = new Map<number, IdempotencyStatus>();
  let retryAfterSeconds = -1;

  return {
    idempotencyRequest: {
      keyOf,
      replayed(batchIndex) {
        if (!responseHeaders) return;
        if (!batch) {
          responseHeaders.set(IDEMPOTENT_REPLAYED_HEADER, 'true');
          return;
        }
        replayedIndices.add(batchIndex);
        const sorted = [...replayedIndices].sort((a, b) => a - b);
        responseHeaders.set(IDEMPOTENT_REPLAYED_BATCH_HEADER, JSON.stringify(sorted));
      },
      busy(batchIndex, status, retryAfterMs) {
        if (!responseHeaders) return;
        // The longest wait of any call: retrying sooner would only meet the same answer.
        retryAfterSeconds = Math.max(
          retryAfterSeconds,
          Math.ceil(Math.max(0, retryAfterMs) / 1000),
        );
        responseHeaders.set(RETRY_AFTER_HEADER, String(retryAfterSeconds));
        if (!batch) {
          responseHeaders.set(IDEMPOTENCY_STATUS_HEADER, status);
          return;
        }
        statuses.set(batchIndex, status);
        responseHeaders.set(
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

function httpKeys(
  headers: RequestHeadersLike,
  batch: boolean,
): (batchIndex: number) => string | undefined {
  const single = header(headers, IDEMPOTENCY_KEY_HEADER);
  const batchHeader = header(headers, IDEMPOTENCY_KEY_BATCH_HEADER);
  if (!batch) {
    return () => {
      if (single === undefined && batchHeader !== undefined) {
        throw new TRPCError({
          code: 'BAD_REQUEST',
          message:
            `${IDEMPOTENCY_KEY_BATCH_HEADER} is for batch requests (?batch=1); a single call ` +
            `carries its key in ${IDEMPOTENCY_KEY_HEADER}.`,
        });
      }
      return single;
    };
  }
  // Parsed once per request, on first use: a batch without idempotent calls never pays.
  let keys: ReadonlyMap<number, string> | undefined;
  return (batchIndex) => {
    if (single !== undefined) {
      throw new TRPCError({
        code: 'BAD_REQUEST',
        message:
          `A batch request (?batch=1) carries its keys in ${IDEMPOTENCY_KEY_BATCH_HEADER}, one per ` +
          `operation by batch index, not in ${IDEMPOTENCY_KEY_HEADER}.`,
      });
    }
    if (batchHeader === undefined) return undefined;
    keys ??= batchKeys(batchHeader);
    return keys.get(batchIndex);
  };
}
