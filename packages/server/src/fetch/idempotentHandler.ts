import {
  createIdempotency,
  defaultErrorPolicy,
  type ErrorDecision,
  type HandlerContext,
  IDEMPOTENCY_KEY_HEADER,
  IDEMPOTENT_REPLAYED_HEADER,
  isLeaseLostError,
  validateKey,
} from '@idem/core';
import {
  exactJson,
  fingerprintNow,
  notifyObserver,
  parseKeyHeader,
  resolveErrorPolicy,
} from '@idem/core/store';
import { drizzleStore } from '../drizzle/drizzleStore.js';
import type { PgDatabaseLike, TransactionOf } from '../drizzle/PgDatabaseLike.js';
import { DEFAULT_ERROR_DOCS_URL } from '../errorDocs.js';
import { storedScope } from '../storedScope.js';
import { lockWaitOf, transactionMode } from '../transactionMode/transactionMode.js';
import { validateDerivedKey } from '../validateDerivedKey.js';
import {
  checkHandlerOptions,
  type HandlerIdempotency,
  type HandlerTransactionIdempotency,
  type IdempotentHandlerOptions,
  type TransactionHandlerOptions,
} from './IdempotentHandlerOptions.js';
import {
  idempotencyErrorResponse,
  problemOf,
  problemResponse,
  storeFailedResponse,
  thrownErrorResponse,
} from './problemResponse.js';
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

/** Carries a response the policy released out of the engine, which then frees the key. */
class ReleasedResponse extends Error {
  constructor(readonly response: Response) {
    super(`released a ${response.status} response`);
  }
}

/** How a handler ended in transaction mode: a response (read whole), or a failure thrown on. */
type Ran =
  | { ok: true; response: Response; stored: StoredResponse; policy: ErrorDecision }
  | { ok: false; error: unknown };

/** Every error that reaches the engine was already judged: it releases the key. */
const RELEASE = { ...defaultErrorPolicy, classify: (): ErrorDecision => 'release' };

const MISSING_KEY =
  `This request requires an idempotency key: send it in the ${IDEMPOTENCY_KEY_HEADER} header, ` +
  '1–255 printable ASCII characters (0x20–0x7E), e.g. crypto.randomUUID(), the same on every ' +
  'retry of the request.';

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
    idempotency: HandlerTransactionIdempotency<TransactionOf<TDb>, TRequired>,
  ) => Response | Promise<Response>,
): (request: Request) => Promise<Response>;
export function idempotentHandler<TRequired extends boolean = true>(
  options: IdempotentHandlerOptions<TRequired>,
  handler: (
    request: Request,
    idempotency: HandlerIdempotency<TRequired>,
  ) => Response | Promise<Response>,
): (request: Request) => Promise<Response>;
export function idempotentHandler(
  options: IdempotentHandlerOptions<boolean> | TransactionHandlerOptions<PgDatabaseLike, boolean>,
  handler: (request: Request, idempotency: never) => Response | Promise<Response>,
): (request: Request) => Promise<Response> {
  const {
    mode = 'lease',
    store,
    db,
    scope,
    route,
    key: derive,
    required = true,
    maxBodyBytes = DEFAULT_MAX_BODY_BYTES,
    replayHeaders = DEFAULT_REPLAY_HEADERS,
    responsePolicy = storeResponseByStatus,
    fingerprintQuery = true,
    errorPolicy,
    docsUrl = DEFAULT_ERROR_DOCS_URL,
    ...engineOptions
  } = options;
  checkHandlerOptions({ mode, store, db, scope, maxBodyBytes, fingerprintQuery });
  const engine = createIdempotency({
    ...engineOptions,
    store: store ?? drizzleStore(db!),
    errorPolicy: RELEASE,
  });
  const classifyThrown = resolveErrorPolicy(errorPolicy).classify;
  const replaySet = new Set(replayHeaders.map((name) => name.toLowerCase()));
  const routeOf =
    typeof route === 'function'
      ? route
      : (request: Request) => route ?? new URL(request.url).pathname;
  const missingKey = () =>
    problemResponse({ ...problemOf('INVALID_KEY', 400, MISSING_KEY, docsUrl), reason: 'missing' });
  // In transaction mode the context carries `tx`; the overloads type each mode's handler.
  const run = handler as (
    request: Request,
    idempotency: HandlerContext | undefined,
  ) => Response | Promise<Response>;
  const inTransaction =
    mode === 'transaction'
      ? transactionMode<Ran>({
          db: db!,
          settings: engine.settings,
          lockWaitMs: lockWaitOf(engine.settings),
          emit: (event) => notifyObserver(engineOptions.onEvent, { ...event, mode: 'transaction' }),
          settle: (ran) => {
            if (!ran.ok || ran.policy === 'release') {
              return { kind: 'release', error: ran.ok ? undefined : ran.error };
            }
            // A stored refusal (4xx) answers every retry, but what the handler wrote before
            // refusing is undone, as a thrown error would undo it.
            return {
              kind: ran.response.status < 400 ? 'commit' : 'undo',
              value: ran.stored,
            };
          },
          replay: (replayed) => {
            // The handler's answers are stored as responses, never as errors.
            if (!replayed.ok) throw replayed.error;
            return {
              ok: true,
              response: replayedResponse(replayed.value as StoredResponse, {
                [IDEMPOTENT_REPLAYED_HEADER]: 'true',
              }),
              stored: replayed.value as StoredResponse,
              policy: 'store',
            };
          },
        })
      : undefined;

  const headerKey = (request: Request): string | undefined => {
    const header = request.headers.get(IDEMPOTENCY_KEY_HEADER);
    return header === null ? undefined : validateKey(parseKeyHeader(header));
  };

  return async (request) => {
    const method = request.method.toUpperCase();
    let key: string | undefined;
    try {
      // Without key(), a request without a valid key is answered before its body is read.
      if (!derive) key = headerKey(request);
    } catch (error) {
      return idempotencyErrorResponse(error, docsUrl)!;
    }
    if (!derive && key === undefined && required) return missingKey();

    const read = await readRequest(request, maxBodyBytes, docsUrl);
    if (!read.ok) return read.response;
    const { bytes, text, json, body } = read;

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
        return missingKey();
      }
      const routeName = routeOf(request);
      const storedUnder = storedScope(
        await scope(request),
        `${method} ${routeName}`,
        'idempotentHandler()',
      );
      // Key order in a JSON body does not matter, a number counts by its literal's value;
      // any other body counts byte for byte. The query counts unless the route says not.
      const query = fingerprintQuery ? canonicalQuery(request.url) : undefined;
      let fingerprint = fingerprintNow({
        method,
        route: routeName,
        ...(query && { query }),
        body: json !== undefined ? { json: exactJson(text, json) } : encodeBody(bytes),
      });
      if (typeof fingerprint !== 'string') fingerprint = await fingerprint;
      return await respond(storedUnder, key, fingerprint, body);
    } catch (error) {
      const answer = idempotencyErrorResponse(error, docsUrl);
      if (answer) return answer;
      throw error;
    }
  };

  /**
   * Runs the handler and reads its response whole: the answer to send, what to store, and
   * whether the policy stores it. A failure the policy releases is returned, to be thrown on.
   */
  async function runHandler(request: Request, context: HandlerContext): Promise<Ran> {
    let response: Response;
    try {
      response = await run(request, context);
    } catch (error) {
      // A handler that lost its lease fails with whatever its code made of the aborted
      // signal (an AbortError from fetch or a timer): the engine must see the
      // LeaseLostError, so that it writes nothing and the answer is 409 LEASE_LOST.
      const reason: unknown = context.signal.aborted ? context.signal.reason : undefined;
      if (isLeaseLostError(reason)) throw reason;
      if (isLeaseLostError(error)) throw error;
      if (classifyThrown(error) === 'release') return { ok: false, error };
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
    const answer = new Response(nullBodyStatus(response.status) ? null : (bytes as BodyInit), {
      status: response.status,
      statusText: response.statusText,
      headers: response.headers,
    });
    return { ok: true, response: answer, stored, policy: responsePolicy(answer) };
  }

  /** Runs the handler under the key, or replays the key's stored response. */
  async function respond(
    scope: string,
    key: string,
    fingerprint: string,
    request: Request,
  ): Promise<Response> {
    let answer: Response | undefined;
    let thrown: { error: unknown } | undefined;
    try {
      if (inTransaction) {
        const { result } = await inTransaction({
          scope,
          key,
          fingerprint,
          signal: request.signal,
          run: (context) => runHandler(request, context),
        });
        if (result.ok) return result.response;
        thrown = { error: result.error };
        throw result.error;
      }
      const outcome = await engine.execute({ scope, key, fingerprint }, async (context) => {
        const ran = await runHandler(request, context);
        if (!ran.ok) {
          thrown = { error: ran.error };
          throw ran.error;
        }
        answer = ran.response;
        if (ran.policy === 'release') throw new ReleasedResponse(answer);
        return ran.stored;
      });
      if (!outcome.replayed) return answer!;
      return replayedResponse(outcome.value as StoredResponse, {
        [IDEMPOTENT_REPLAYED_HEADER]: 'true',
      });
    } catch (error) {
      if (error instanceof ReleasedResponse) return error.response;
      if (isLeaseLostError(error)) return idempotencyErrorResponse(error, docsUrl)!;
      if (thrown && error === thrown.error) throw error;
      const known = idempotencyErrorResponse(error, docsUrl);
      if (known) return known;
      return storeFailedResponse();
    }
  }
}
