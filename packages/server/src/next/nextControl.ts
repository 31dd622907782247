/**
 * Next.js ends an action early by throwing: `redirect()` throws an error whose `digest`
 * starts with `NEXT_REDIRECT` (and names the target), `notFound()`, `forbidden()` and
 * `unauthorized()` one starting with `NEXT_HTTP_ERROR_FALLBACK` (older versions:
 * `NEXT_NOT_FOUND`). Such a throw is the action's answer, not its failure: it is stored, and
 * every replay throws it again, so a resubmitted form lands where the first did.
 */
export interface NextControl {
  digest: string;
  message: string;
}

const CONTROL_DIGEST = /^(NEXT_REDIRECT|NEXT_HTTP_ERROR_FALLBACK|NEXT_NOT_FOUND)(;|$)/;

/** The control flow `error` stands for, or `undefined` for any other error. */
export function nextControlOf(error: unknown): NextControl | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const { digest, message } = error as { digest?: unknown; message?: unknown };
  if (typeof digest !== 'string' || !CONTROL_DIGEST.test(digest)) return undefined;
  return { digest, message: typeof message === 'string' ? message : digest };
}

/** Whether a control flow keeps a transaction's writes: a redirect does, a 404/403/401 not. */
export function keepsWrites(control: NextControl): boolean {
  return control.digest.startsWith('NEXT_REDIRECT');
}

/** The error to throw again on a replay: Next.js reads only its `digest`. */
export function controlError(control: NextControl): Error {
  return Object.assign(new Error(control.message), { digest: control.digest });
}
