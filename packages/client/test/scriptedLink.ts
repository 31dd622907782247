import { type Operation, TRPCClientError, type TRPCLink } from '@trpc/client';
import type { AnyRouter } from '@trpc/server';
import { observable } from '@trpc/server/observable';

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

const CODE_BY_STATUS: Record<number, [string, number]> = {
  400: ['BAD_REQUEST', -32600],
  401: ['UNAUTHORIZED', -32001],
  403: ['FORBIDDEN', -32003],
  404: ['NOT_FOUND', -32004],
  408: ['TIMEOUT', -32008],
  409: ['CONFLICT', -32009],
  422: ['UNPROCESSABLE_CONTENT', -32022],
  425: ['TOO_EARLY', -32603],
  429: ['TOO_MANY_REQUESTS', -32029],
  500: ['INTERNAL_SERVER_ERROR', -32603],
  502: ['BAD_GATEWAY', -32603],
  503: ['SERVICE_UNAVAILABLE', -32603],
  504: ['GATEWAY_TIMEOUT', -32603],
};

/**
 * A TRPCClientError built the way httpLink builds it: from the JSON error body, with
 * `meta.response` (a real `Response`, headers included) and `meta.responseJSON`.
 */
export function httpError(
  reply: Extract<Reply, { status: number }>,
  path = 'test.path',
): TRPCClientError<AnyRouter> {
  const [defaultCode, rpcCode] = CODE_BY_STATUS[reply.status] ?? ['INTERNAL_SERVER_ERROR', -32603];
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
