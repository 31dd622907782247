import { type Operation, TRPCClientError, type TRPCLink } from '@trpc/client';
import { type AnyRouter, TRPCError } from '@trpc/server';
import { getHTTPStatusCodeFromError } from '@trpc/server/http';
import { observable } from '@trpc/server/observable';
import { type TRPC_ERROR_CODE_KEY, TRPC_ERROR_CODES_BY_KEY } from '@trpc/server/rpc';

/** One scripted answer of the fake server. */
export type Reply =
  | { data: unknown }
  | {
      status: number;
      /** tRPC error code; defaults from the status. */
      code?: string;
      headers?: Record<string, string>;
      /** What idem's error formatter adds to `error.data`. */
      idempotency?: { code: string; retryAfterMs?: number };
      /** Drop `data.httpStatus`, as a custom error formatter might. */
      omitHttpStatus?: boolean;
    }
  | { networkError: true }
  | { abortError: true }
  /**
   * Never answers: the attempt stays in flight until it is unsubscribed, or until the
   * operation's signal aborts (then it fails with an AbortError, as httpLink does).
   */
  | { hang: true };

/**
 * tRPC's error codes by the HTTP status its server answers them with (400 is BAD_REQUEST,
 * not PARSE_ERROR); a status tRPC has no code for (418, 425) is an INTERNAL_SERVER_ERROR.
 */
const CODE_BY_STATUS = new Map(
  (Object.keys(TRPC_ERROR_CODES_BY_KEY) as TRPC_ERROR_CODE_KEY[])
    .filter((code) => code !== 'PARSE_ERROR')
    .map((code) => [getHTTPStatusCodeFromError(new TRPCError({ code })), code]),
);

/**
 * A TRPCClientError built the way httpLink builds it: from the JSON error body, with
 * `meta.response` (a real `Response`, headers included) and `meta.responseJSON`.
 */
export function httpError(
  reply: Extract<Reply, { status: number }>,
  path = 'test.path',
): TRPCClientError<AnyRouter> {
  const defaultCode = CODE_BY_STATUS.get(reply.status) ?? 'INTERNAL_SERVER_ERROR';
  const rpcCode = TRPC_ERROR_CODES_BY_KEY[defaultCode];
  const code = reply.code ?? defaultCode;
  const body = {
    error: {
      message: `${code} from the scripted server`,
      code: rpcCode,
      data: {
        code,
        ...(reply.omitHttpStatus ? {} : { httpStatus: reply.status }),
        path,
        ...(reply.idempotency ? { idempotency: reply.idempotency } : {}),
      },
    },
  };
  const response = new Response(JSON.stringify(body), {
    status: reply.status,
    headers: { 'content-type': 'application/json', ...reply.headers },
  });
  return TRPCClientError.from(body, { meta: { response, responseJSON: body } });
}

/** What httpLink gives when fetch rejects: no meta, the TypeError as cause. */
export function networkError(): TRPCClientError<AnyRouter> {
  return TRPCClientError.from(new TypeError('fetch failed'));
}

export interface ScriptedLink {
  link: TRPCLink<AnyRouter>;
  /** Every operation that reached the terminating link, in order. */
  calls: Operation[];
  /** How many attempts are in flight (sent, not answered, not cancelled). */
  readonly pending: number;
}

/**
 * A terminating link that answers from a script: `replies[n]` answers the n-th call
 * (the last reply repeats), or a function of the operation and the call's index. Answers
 * arrive asynchronously (a microtask), as over a network.
 */
export function scriptedLink(
  replies: readonly Reply[] | ((op: Operation, index: number) => Reply),
): ScriptedLink {
  const calls: Operation[] = [];
  let pending = 0;
  const replyFor = (op: Operation, index: number): Reply => {
    if (typeof replies === 'function') return replies(op, index);
    const reply = replies[Math.min(index, replies.length - 1)];
    if (!reply) throw new Error('scriptedLink: empty script');
    return reply;
  };

  const link: TRPCLink<AnyRouter> =
    () =>
    ({ op }) =>
      observable((observer) => {
        const index = calls.length;
        calls.push(op);
        const reply = replyFor(op, index);
        let cancelled = false;
        pending += 1;
        if ('hang' in reply) {
          const onAbort = () => {
            if (cancelled) return;
            pending -= 1;
            cancelled = true;
            observer.error(
              TRPCClientError.from(new DOMException('This operation was aborted', 'AbortError')),
            );
          };
          op.signal?.addEventListener('abort', onAbort, { once: true });
          return () => {
            op.signal?.removeEventListener('abort', onAbort);
            if (!cancelled) pending -= 1;
            cancelled = true;
          };
        }
        void Promise.resolve().then(() => {
          if (cancelled) return;
          pending -= 1;
          cancelled = true;
          if ('data' in reply) {
            observer.next({ result: { type: 'data', data: reply.data } });
            observer.complete();
          } else if ('networkError' in reply) {
            observer.error(networkError());
          } else if ('abortError' in reply) {
            observer.error(
              TRPCClientError.from(new DOMException('This operation was aborted', 'AbortError')),
            );
          } else {
            observer.error(httpError(reply, op.path));
          }
        });
        return () => {
          if (!cancelled) pending -= 1;
          cancelled = true;
        };
      });

  return {
    link,
    calls,
    get pending() {
      return pending;
    },
  };
}
