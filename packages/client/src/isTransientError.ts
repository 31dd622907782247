import { classifyError } from './classifyError.js';

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
