import { IDEMPOTENCY_STATUS_HEADER, RETRY_AFTER_HEADER, retryAfterSeconds } from '@idem/core';
import { DEFAULT_ERROR_DOCS_URL, errorTypeUrl } from '../adapter/errorDocs.js';
import type { Refusal, RefusalCode } from '../adapter/refusals.js';

/** The media type of an RFC 9457 problem document. */
export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

/** The codes of idem's answers to a plain HTTP request. */
export type ProblemCode = RefusalCode;

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
  STORE_FAILED: 'Idempotency store failed',
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
 * The answer to a refusal of idem's table (`refusalOf`): a problem document with idem's
 * code and its documentation link, or `about:blank` for a refusal without a code (a
 * principal or a route the store cannot keep); the 409s carry `Retry-After` and `Idempotency-Status`.
 */
export function refusalResponse(refusal: Refusal, docsUrl: string): Response {
  const { status, code, message } = refusal;
  if (code === undefined) {
    return problemResponse(plainProblem(status, STATUS_TITLES[status], message));
  }
  const problem: IdempotencyProblem = problemOf(code, status, message, docsUrl);
  if (refusal.reason !== undefined) problem.reason = refusal.reason;
  if (refusal.retryAfterMs !== undefined) problem.retryAfterMs = refusal.retryAfterMs;
  if (refusal.limitBytes !== undefined) problem.maxBodyBytes = refusal.limitBytes;
  const headers: Record<string, string> = {};
  if (refusal.idempotencyStatus !== undefined) {
    headers[RETRY_AFTER_HEADER] = String(retryAfterSeconds(refusal.retryAfterMs ?? 0));
    headers[IDEMPOTENCY_STATUS_HEADER] = refusal.idempotencyStatus;
  }
  return problemResponse(problem, headers);
}

/** The reason phrase of each status a refusal without a code has. */
const STATUS_TITLES: Record<Refusal['status'], string> = {
  400: 'Bad Request',
  409: 'Conflict',
  413: 'Content Too Large',
  422: 'Unprocessable Content',
  500: 'Internal Server Error',
};

/** A problem that is not one of idem's codes: `type` is `about:blank` (RFC 9457 §4.2.1). */
export function plainProblem(status: number, title: string, detail: string): ProblemDocument {
  return { type: 'about:blank', title, status, detail };
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
