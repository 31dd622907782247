import {
  IDEMPOTENCY_STATUS_HEADER,
  type IdempotencyErrorCode,
  isConfigurationError,
  isInvalidKeyError,
  isKeyMismatchError,
  isLeaseLostError,
  isRequestInProgressError,
  isUnserializableValueError,
  RETRY_AFTER_HEADER,
  retryAfterSeconds,
} from '@idem/core';
import { DEFAULT_ERROR_DOCS_URL, errorTypeUrl } from '../errorDocs.js';
import { UnstorablePrincipalError } from '../storedScope.js';
import { STORE_FAILED_MESSAGE } from '../storeFailedMessage.js';

/** The media type of an RFC 9457 problem document. */
export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

/** The codes of idem's answers to a plain HTTP request. */
export type ProblemCode = IdempotencyErrorCode | 'INPUT_TOO_LARGE' | 'INVALID_BODY';

/**
 * An RFC 9457 problem document, as `idempotentHandler` answers what idem refused. `type`
 * links to the code's documentation (`<docsUrl>#<code in lower case>`), the same link
 * tRPC errors carry in `data.idempotency.type`; `code` and the fields after it are
 * extension members.
 */
export interface IdempotencyProblem extends ProblemDocument {
  code: ProblemCode;
  /** For `INVALID_KEY`: `'missing'`, `'empty'`, `'too_long'`, `'invalid_character'` or `'malformed_header'`. */
  reason?: string;
  /** For the 409s: when a retry may succeed, in milliseconds (also sent as `Retry-After`). */
  retryAfterMs?: number;
  /** For `INPUT_TOO_LARGE`: the limit, in bytes (`maxBodyBytes`). */
  maxBodyBytes?: number;
}

const TITLES: Record<ProblemCode, string> = {
  INVALID_KEY: 'Invalid idempotency key',
  KEY_MISMATCH: 'Idempotency key reused for another request',
  REQUEST_IN_PROGRESS: 'A request with this idempotency key is in progress',
  LEASE_LOST: 'Another attempt took over this idempotency key',
  INPUT_TOO_LARGE: 'Request body too large',
  INVALID_BODY: 'Unreadable request body',
  UNSERIALIZABLE_VALUE: 'Request body cannot be fingerprinted',
  INVALID_CONFIGURATION: 'Server misconfigured',
  INVALID_EVENT: 'Invalid event',
  RETRY_BUDGET_EXHAUSTED: 'Retry budget exhausted',
};

/** The members every problem document has (RFC 9457 §3.1). */
export interface ProblemDocument {
  type: string;
  title: string;
  status: number;
  detail: string;
}

/** A problem+json response; `headers` are added to its own. */
export function problemResponse(
  problem: ProblemDocument | IdempotencyProblem,
  headers: Record<string, string> = {},
): Response {
  return new Response(JSON.stringify(problem), {
    status: problem.status,
    headers: { 'content-type': PROBLEM_CONTENT_TYPE, ...headers },
  });
}

/** The problem document of one of idem's codes. */
export function problemOf(
  code: ProblemCode,
  status: number,
  detail: string,
  docsUrl: string = DEFAULT_ERROR_DOCS_URL,
): IdempotencyProblem {
  return { type: errorTypeUrl(docsUrl, code), title: TITLES[code], status, detail, code };
}

/**
 * The answer to an error idem raised before or around the handler: 400 for a bad key or an
 * input that cannot be fingerprinted, 422 for a key reused with another request, 409 (with
 * `Retry-After` and `Idempotency-Status`) for a busy key or a lost lease, 500 for the
 * server's configuration. `undefined` for any other error: the caller decides.
 */
export function idempotencyErrorResponse(error: unknown, docsUrl: string): Response | undefined {
  const problem = (code: ProblemCode, status: number) =>
    problemOf(code, status, (error as Error).message, docsUrl);
  if (isInvalidKeyError(error)) {
    return problemResponse({ ...problem('INVALID_KEY', 400), reason: error.reason });
  }
  if (isKeyMismatchError(error)) return problemResponse(problem('KEY_MISMATCH', 422));
  if (isRequestInProgressError(error)) {
    return problemResponse(
      { ...problem('REQUEST_IN_PROGRESS', 409), retryAfterMs: error.retryAfterMs },
      {
        [RETRY_AFTER_HEADER]: String(retryAfterSeconds(error.retryAfterMs)),
        [IDEMPOTENCY_STATUS_HEADER]: 'in-progress',
      },
    );
  }
  if (isLeaseLostError(error)) {
    // Another attempt owns the key now and will finish it: a retry with the same key gets
    // its answer, so this is a conflict to retry, not a server fault.
    return problemResponse(
      { ...problem('LEASE_LOST', 409), retryAfterMs: 0 },
      { [RETRY_AFTER_HEADER]: '0', [IDEMPOTENCY_STATUS_HEADER]: 'lease-lost' },
    );
  }
  if (isUnserializableValueError(error)) {
    return problemResponse(problem('UNSERIALIZABLE_VALUE', 400));
  }
  if (error instanceof UnstorablePrincipalError) {
    return problemResponse(plainProblem(400, 'Bad Request', error.message));
  }
  if (isConfigurationError(error)) return problemResponse(problem('INVALID_CONFIGURATION', 500));
  return undefined;
}

/** A problem that is not one of idem's codes: `type` is `about:blank` (RFC 9457 §4.2.1). */
export function plainProblem(status: number, title: string, detail: string): ProblemDocument {
  return { type: 'about:blank', title, status, detail };
}

/**
 * The answer when the store itself failed (a lost connection, a refused statement): its
 * message may hold SQL text and values, which a response must never show.
 */
export function storeFailedResponse(): Response {
  return problemResponse(plainProblem(500, 'Internal Server Error', STORE_FAILED_MESSAGE));
}

/** A thrown error the policy stores, answered (and replayed) as a problem with its status. */
export function thrownErrorResponse(error: unknown): Response {
  const fields = (typeof error === 'object' && error !== null ? error : {}) as Record<
    string,
    unknown
  >;
  const status = ['status', 'statusCode', 'httpStatus']
    .map((name) => fields[name])
    .find((value) => typeof value === 'number' && value >= 400 && value <= 599) as
    | number
    | undefined;
  const name = typeof fields.name === 'string' ? fields.name : 'Error';
  const message = typeof fields.message === 'string' ? fields.message : String(error);
  return problemResponse(plainProblem(status ?? 500, name, message));
}
