import {
  type Attempt,
  defaultErrorPolicy,
  type ErrorDecision,
  type ErrorPolicy,
  type HandlerContext,
  IDEMPOTENCY_KEY_HEADER,
  IDEMPOTENT_REPLAYED_HEADER,
  isLeaseLostError,
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
import { failureOf } from '../adapter/failureOf.js';
import { fingerprintWithin } from '../adapter/fingerprintWithin.js';
import type { OptionalIf } from '../adapter/KeyedOptions.js';
import { missingKey } from '../adapter/missingKey.js';
import { refusalOf, STORE_FAILED } from '../adapter/refusals.js';
import { storedScope } from '../adapter/storedScope.js';
import { validateDerivedKey } from '../adapter/validateDerivedKey.js';
import type { PgDatabaseLike, TransactionOf } from '../postgres/PgDatabaseLike.js';
import type { TransactionIdempotency } from '../postgres/transactionMode.js';
import {
  checkHandlerOptions,
  type IdempotentHandlerOptions,
  type TransactionHandlerOptions,
} from './IdempotentHandlerOptions.js';
import { refusalResponse, thrownErrorResponse } from './problemResponse.js';
import { readRequest } from './readBody.js';
import {
  DEFAULT_REPLAY_HEADERS,
  encodeBody,
  nullBodyStatus,
  replayedResponse,
  type StoredResponse,
  storeResponse,
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
 * Options that cannot work together throw `ConfigurationError` here, at start-up.
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
  const {
    route,
    key: derive,
    required = true,
    maxBodyBytes = DEFAULT_MAX_BODY_BYTES,
    replayHeaders = DEFAULT_REPLAY_HEADERS,
    responsePolicy = storeResponseByStatus,
    fingerprintQuery = true,
    docsUrl = DEFAULT_ERROR_DOCS_URL,
  } = options;
  checkHandlerOptions({ maxBodyBytes, fingerprintQuery });
  const runner = createKeyedRunner(options, {
    factory: 'idempotentHandler()',
    // The handler's answers are stored as responses, and what its errors come to is decided
    // below: every failure that reaches the engine was already judged, and releases the key.
    errorPolicy: RELEASE,
  });
  const answer = handlerAnswer({
    errorPolicy: resolveErrorPolicy(options.errorPolicy),
    responsePolicy,
    replayHeaders,
  });
  // The overloads type each mode's context; here the handler takes either.
  const run = handler as (
    request: Request,
    idempotency: KeyedContext | undefined,
  ) => Response | Promise<Response>;
  const routeOf =
    typeof route === 'function'
      ? route
      : (request: Request) => route ?? new URL(request.url).pathname;
  const refused = (error: unknown) => {
    const refusal = refusalOf(error);
    // Not idem's: the app's own code (scope(), key(), an unprotected handler) threw it.
    if (!refusal) throw error;
    return refusalResponse(refusal, docsUrl);
  };

  return async (request) => {
    const method = request.method.toUpperCase();
    let key: string | undefined;
    try {
      // Without key(), a request without a valid key is answered before its body is read.
      if (!derive) key = headerKey(request);
      if (!derive && key === undefined && required) throw missingKey('request');
    } catch (error) {
      return refused(error);
    }
    const read = await readRequest(request, maxBodyBytes, docsUrl);
    if (!read.ok) return read.response;
    const { bytes, text, json, body } = read;
    let call: KeyedCall;
    try {
      if (derive) {
        const derived = await derive({ request: body, text, json });
        key =
          derived === undefined
            ? headerKey(request)
            : validateDerivedKey(derived, 'from the request');
      }
      if (key === undefined) {
        if (!required) return await run(body, undefined);
        throw missingKey('request');
      }
      const routeName = routeOf(request);
      const scope = storedScope(
        await options.scope(request),
        `${method} ${routeName}`,
        'idempotentHandler()',
      );
      // Key order in a JSON body does not matter, a number counts by its literal's value;
      // any other body counts byte for byte. The query counts unless the route says not.
      const query = fingerprintQuery ? canonicalQuery(request.url) : undefined;
      const fingerprinted = fingerprintWithin(
        {
          method,
          route: routeName,
          ...(query && { query }),
          body: json !== undefined ? { json: exactJson(text, json) } : encodeBody(bytes),
        },
        'the request body',
      );
      if (!fingerprinted.ok) return refusalResponse(fingerprinted.refusal, docsUrl);
      call = { scope, key, fingerprint: await fingerprinted.fingerprint, signal: body.signal };
    } catch (error) {
      return refused(error);
    }
    let result: RunResult<Response>;
    try {
      result = await runner.run(call, (idempotency) =>
        answer(() => run(body, idempotency), idempotency),
      );
    } catch (error) {
      // The store failed (or idem refused the options): never its message, which may hold SQL.
      return refusalResponse(refusalOf(error) ?? STORE_FAILED, docsUrl);
    }
    if (result.ok) {
      if (!result.replayed) return result.value;
      return replayedResponse(result.value as StoredResponse, {
        [IDEMPOTENT_REPLAYED_HEADER]: 'true',
      });
    }
    // The handler's failure, which the policy released, is thrown on for the framework's 500.
    return refused(result.error);
  };
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

/**
 * Runs the handler and judges what it came to, for the engine: a response (read whole, so
 * that it can be stored and still sent) kept as the policy says, or a failure that releases
 * the key. A thrown error the error policy stores becomes a problem response, stored.
 */
function handlerAnswer(policies: {
  errorPolicy: ErrorPolicy;
  responsePolicy: (response: Response) => ErrorDecision;
  replayHeaders: readonly string[];
}) {
  const { errorPolicy, responsePolicy } = policies;
  const replaySet = new Set(policies.replayHeaders.map((name) => name.toLowerCase()));
  return async (
    invoke: () => Response | Promise<Response>,
    idempotency: KeyedContext,
  ): Promise<Attempt<Response>> => {
    let response: Response;
    try {
      response = await invoke();
    } catch (error) {
      const failure = failureOf(error, idempotency);
      if (isLeaseLostError(failure) || errorPolicy.classify(failure) === 'release') {
        return { ok: false, error: failure };
      }
      response = thrownErrorResponse(error);
    }
    let read: Awaited<ReturnType<typeof storeResponse>>;
    try {
      read = await storeResponse(response, replaySet);
    } catch (error) {
      // The handler's response body failed (a stream that errored, a body already used):
      // the handler's failure, thrown on; the key is released.
      return { ok: false, error };
    }
    const { bytes, stored } = read;
    const value = new Response(nullBodyStatus(response.status) ? null : (bytes as BodyInit), {
      status: response.status,
      statusText: response.statusText,
      headers: response.headers,
    });
    // A stored refusal (4xx) answers every retry, but what the handler wrote before refusing
    // is undone in transaction mode, as a thrown error would undo it.
    const keep =
      responsePolicy(value) === 'release' ? 'nothing' : value.status < 400 ? 'all' : 'answer';
    return { ok: true, value, stored, keep };
  };
}
