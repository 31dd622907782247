import {
  defaultErrorPolicy,
  type ErrorDecision,
  type ErrorPolicy,
  type HandlerContext,
  IDEMPOTENCY_KEY_HEADER,
  IDEMPOTENT_REPLAYED_HEADER,
  type RunResult,
  validateKey,
} from '@idem/core';
import { exactJson, parseKeyHeader, resolveErrorPolicy } from '@idem/core/store';
import {
  createKeyedRunner,
  type KeyedCall,
  type KeyedContext,
} from '../adapter/createKeyedRunner.js';
import { DEFAULT_ERROR_DOCS_URL } from '../adapter/errorDocs.js';
import { fingerprintWithin, notFingerprinted } from '../adapter/fingerprintWithin.js';
import type { OptionalIf } from '../adapter/KeyedOptions.js';
import { missingKey } from '../adapter/missingKey.js';
import { refusalOf, STORE_FAILED } from '../adapter/refusals.js';
import { storedScope } from '../adapter/storedScope.js';
import { validateDerivedKey } from '../adapter/validateDerivedKey.js';
import type { PgDatabaseLike, TransactionOf } from '../postgres/PgDatabaseLike.js';
import type { TransactionIdempotency } from '../postgres/transactionMode.js';
import { handlerAnswer } from './handlerAnswer.js';
import {
  checkHandlerOptions,
  type IdempotentHandlerOptions,
  type TransactionHandlerOptions,
} from './IdempotentHandlerOptions.js';
import { refusalResponse } from './problemResponse.js';
import { readRequest } from './readBody.js';
import {
  DEFAULT_REPLAY_HEADERS,
  encodeBody,
  replayedResponse,
  type StoredResponse,
} from './storedResponse.js';

/** @default of `maxBodyBytes`: 1 MiB. */
export const DEFAULT_MAX_BODY_BYTES = 1_048_576;

/**
 * The default `responsePolicy`: a response below 400 is stored; from 400 on, the status
 * decides as it does for a thrown error in `@idem/core`'s `defaultErrorPolicy` (one rule).
 */
export function storeResponseByStatus(response: Response): ErrorDecision {
  return response.status < 400 ? 'store' : defaultErrorPolicy.classify({ status: response.status });
}

/**
 * Makes a Fetch API handler safe to retry (Next.js route handlers, Hono, Bun, Deno, or
 * Node through an adapter): the first request with an `Idempotency-Key` runs the handler,
 * and every later one with that key (same principal, method and route) gets the first
 * response (status, allow-listed headers, body byte for byte) with `Idempotent-Replayed:
 * true`, without running it again. idem's own refusals are `application/problem+json`.
 *
 * ```ts
 * export const POST = idempotentHandler(
 *   { db, scope: (request) => `user:${userOf(request)}` },
 *   async (request, idempotency) => Response.json(await placeOrder(await request.json())),
 * );
 * ```
 *
 * By default the engine is `@idem/core`'s lease mode: the claim commits first, the handler
 * runs under a heartbeat-renewed lease (`idempotency.step`, `deriveKey`, `signal` as in the
 * tRPC middleware), and the stored response is written fenced by the claim's version. With
 * `mode: 'transaction'` it is the tRPC middleware's transaction mode: the claim, the
 * handler's writes through `idempotency.tx` and the stored response commit together, and a
 * stored refusal (4xx) keeps none of the handler's writes.
 * Options that cannot work together throw `ConfigurationError` here, at start-up. A store
 * that fails under a request answers 500 `STORE_FAILED`, and a database without idem's
 * tables 500 `INVALID_CONFIGURATION` naming `migrate(db)`; either is told once to
 * `onStoreError` (by default one `console.error` line), never in the answer.
 */
export function idempotentHandler<TDb extends PgDatabaseLike, TRequired extends boolean = true>(
  options: TransactionHandlerOptions<TDb, TRequired>,
  handler: (
    request: Request,
    idempotency: OptionalIf<TransactionIdempotency<TransactionOf<TDb>>, TRequired>,
  ) => Response | Promise<Response>,
): (request: Request) => Promise<Response>;
export function idempotentHandler<TRequired extends boolean = true>(
  options: IdempotentHandlerOptions<TRequired>,
  handler: (
    request: Request,
    idempotency: OptionalIf<HandlerContext, TRequired>,
  ) => Response | Promise<Response>,
): (request: Request) => Promise<Response>;
export function idempotentHandler(
  options: IdempotentHandlerOptions<boolean> | TransactionHandlerOptions<PgDatabaseLike, boolean>,
  handler: (request: Request, idempotency: never) => Response | Promise<Response>,
): (request: Request) => Promise<Response> {
  const handling = handlingOf(options, handler);
  return (request) => handle(handling, request);
}

/** What the handler was made with, checked once: everything a request needs. */
type Handling = ReturnType<typeof handlingOf>;

function handlingOf(
  options: IdempotentHandlerOptions<boolean> | TransactionHandlerOptions<PgDatabaseLike, boolean>,
  handler: (request: Request, idempotency: never) => Response | Promise<Response>,
) {
  const {
    route,
    maxBodyBytes = DEFAULT_MAX_BODY_BYTES,
    replayHeaders = DEFAULT_REPLAY_HEADERS,
    responsePolicy = storeResponseByStatus,
    fingerprintQuery = true,
    docsUrl = DEFAULT_ERROR_DOCS_URL,
  } = options;
  checkHandlerOptions({ maxBodyBytes, fingerprintQuery });
  return {
    options,
    required: options.required ?? true,
    maxBodyBytes,
    fingerprintQuery,
    docsUrl,
    runner: createKeyedRunner(options, {
      factory: 'idempotentHandler()',
      // The handler's answers are stored as responses, and what its errors come to is
      // decided by `answer`: every failure that reaches the engine was already judged, and
      // releases the key.
      errorPolicy: RELEASE,
    }),
    answer: handlerAnswer({
      errorPolicy: resolveErrorPolicy(options.errorPolicy),
      responsePolicy,
      replayHeaders,
    }),
    // The overloads type each mode's context; here the handler takes either.
    run: handler as (
      request: Request,
      idempotency: KeyedContext | undefined,
    ) => Response | Promise<Response>,
    routeOf:
      typeof route === 'function'
        ? route
        : (request: Request) => route ?? new URL(request.url).pathname,
  };
}

/** The answer to an error idem raised; any other error the app's code threw goes on. */
function refused(handling: Handling, error: unknown): Response {
  const refusal = refusalOf(error);
  if (!refusal) throw error;
  return refusalResponse(refusal, handling.docsUrl);
}

async function handle(handling: Handling, request: Request): Promise<Response> {
  const { options, required, runner, docsUrl } = handling;
  let key: string | undefined;
  try {
    // Without key(), a request without a valid key is answered before its body is read.
    if (!options.key) key = headerKey(request);
    if (!options.key && key === undefined && required) throw missingKey('request');
  } catch (error) {
    return refused(handling, error);
  }
  const read = await readRequest(request, handling.maxBodyBytes, docsUrl);
  if (!read.ok) return read.response;
  let call: KeyedCall | Response;
  try {
    call = await keyedCallOf(handling, request, read, key);
  } catch (error) {
    return refused(handling, error);
  }
  if (call instanceof Response) return call;
  let result: RunResult<Response>;
  try {
    result = await runner.run(call, (idempotency) =>
      handling.answer(() => handling.run(read.body, idempotency), idempotency),
    );
  } catch (error) {
    // The store failed (reported by the runner), or idem refused the call: never the
    // store's message, which may hold SQL.
    return refusalResponse(refusalOf(error) ?? STORE_FAILED, docsUrl);
  }
  if (result.ok) {
    if (!result.replayed) return result.value;
    return replayedResponse(result.value as StoredResponse, {
      [IDEMPOTENT_REPLAYED_HEADER]: 'true',
    });
  }
  // The handler's failure, which the policy released, is thrown on for the framework's 500.
  return refused(handling, result.error);
}

/**
 * The keyed call a request makes (its key, scope and fingerprint), or the response it gets
 * without one: a refusal, or, unkeyed where keys are not required, the handler's own.
 */
async function keyedCallOf(
  handling: Handling,
  request: Request,
  read: Extract<Awaited<ReturnType<typeof readRequest>>, { ok: true }>,
  sentKey: string | undefined,
): Promise<KeyedCall | Response> {
  const { options, required } = handling;
  const { bytes, text, json, body } = read;
  let key = sentKey;
  if (options.key) {
    const derived = await options.key({ request: body, text, json });
    key =
      derived === undefined ? headerKey(request) : validateDerivedKey(derived, 'from the request');
  }
  if (key === undefined) {
    if (!required) return await handling.run(body, undefined);
    // key() reads `json`, which only a JSON body has: say so where that may be why.
    throw missingKey(
      'request',
      options.key && json === undefined
        ? ' (key() found none: this body was not read as JSON, as its Content-Type is not JSON)'
        : '',
    );
  }
  const method = request.method.toUpperCase();
  const route = handling.routeOf(request);
  const scope = storedScope(
    await options.scope(request),
    `${method} ${route}`,
    'idempotentHandler()',
  );
  // Key order in a JSON body does not matter, a number counts by its literal's value; any
  // other body counts byte for byte. The query counts unless the route says not.
  const query = handling.fingerprintQuery ? canonicalQuery(request.url) : undefined;
  let exactBody: unknown;
  try {
    // Reading the body's numbers exactly refuses nesting past 1,000 levels, as below.
    exactBody = json !== undefined ? { json: exactJson(text, json) } : encodeBody(bytes);
  } catch (error) {
    return refusalResponse(notFingerprinted(error, 'the request body').refusal, handling.docsUrl);
  }
  const fingerprinted = fingerprintWithin(
    { method, route, ...(query && { query }), body: exactBody },
    'the request body',
    { outerLevels: 2 },
  );
  if (!fingerprinted.ok) return refusalResponse(fingerprinted.refusal, handling.docsUrl);
  return { scope, key, fingerprint: await fingerprinted.fingerprint, signal: body.signal };
}

/** Every error that reaches the engine was already judged: it releases the key. */
const RELEASE: ErrorPolicy = { ...defaultErrorPolicy, classify: () => 'release' };

/** The key the request's `Idempotency-Key` header holds, validated, if it has one. */
function headerKey(request: Request): string | undefined {
  const header = request.headers.get(IDEMPOTENCY_KEY_HEADER);
  return header === null ? undefined : validateKey(parseKeyHeader(header));
}

/**
 * The query of `url` as the fingerprint takes it: its parameters, percent-decoded as
 * `URLSearchParams` decodes them (so `%7E` and `~` are one character), sorted by name and
 * kept in order within a name; `undefined` for a URL without one, whose fingerprint is as
 * it always was.
 */
function canonicalQuery(url: string): [name: string, value: string][] | undefined {
  const search = new URL(url).search;
  if (search.length <= 1) return undefined;
  const params = new URLSearchParams(search);
  params.sort();
  return [...params];
}
