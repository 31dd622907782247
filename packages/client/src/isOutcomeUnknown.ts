import { classifyError } from './classifyError.js';

/**
 * Whether a call that failed may still have run, or may run if sent again: it stopped on
 * a transient failure, one the links' default policy retries (no response / network
 * error, 408, idem's 409 "key busy" (in progress, or lease lost to a takeover; not other
 * CONFLICTs), 425, 429, 500, 502, 503 and 504), including when keyedRetryLink gave up on
 * one because its retry budget was empty, its `deadlineMs` passed or its `maxAttempts`
 * were used up. The server may or may not have run it, so this is not "failed": retry
 * later with the SAME idempotency key (idem runs it at most once and replays the
 * outcome), or look the outcome up, before telling the user it did not happen.
 *
 * `false` when the server answered with a decision (a 4xx such as 400, 402, 404, 422: the
 * call did not run, or failed for good), with idem's 500 `INVALID_CONFIGURATION` (the
 * server is set up wrong, e.g. idem's tables are missing: nothing ran), or the caller
 * aborted.
 *
 * `retryOn` gets the same answer for each failed attempt, as `transient`.
 */
export function isOutcomeUnknown(error: unknown): boolean {
  return classifyError(error).transient;
}
