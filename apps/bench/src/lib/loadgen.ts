import autocannon from 'autocannon';

export interface LoadTarget {
  path: string;
  /** The `Idempotency-Key` of this target's n-th request (0-based); `undefined`: none. */
  keyOf: (index: number) => string | undefined;
}

export interface LoadOptions {
  url: string;
  /** Requests go to these in turn (one target: every request to it). */
  targets: readonly LoadTarget[];
  /** The JSON request body, the same on every request. */
  body: string;
  connections: number;
  /** Seconds to run; or `amount` requests in total. */
  durationSeconds?: number;
  amount?: number;
}

export interface LoadResult {
  requestsPerSecond: number;
  /** Latency in ms (autocannon's HDR histogram). */
  p50: number;
  p99: number;
  ok: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  durationSeconds: number;
}

/**
 * Drives endpoints with autocannon at a fixed number of connections (each sends its next
 * request when the previous one answered), numbering the requests so every one can carry
 * its own idempotency key. Every variant goes through the same `setupRequest`, so the load
 * generator costs the same whatever the server does.
 */
export async function runLoad(options: LoadOptions): Promise<LoadResult> {
  const headers = { 'content-type': 'application/json', 'x-tenant': 'bench' };
  const result = await autocannon({
    url: options.url,
    connections: options.connections,
    pipelining: 1,
    ...(options.amount !== undefined
      ? { amount: options.amount }
      : { duration: options.durationSeconds ?? 5 }),
    timeout: 30,
    requests: options.targets.map((target) => {
      let index = 0;
      return {
        method: 'POST' as const,
        path: target.path,
        body: options.body,
        headers,
        setupRequest: (request: autocannon.Request) => {
          const key = target.keyOf(index++);
          request.headers = key === undefined ? headers : { ...headers, 'idempotency-key': key };
          return request;
        },
      };
    }),
  });
  return {
    requestsPerSecond: result.requests.total / result.duration,
    p50: result.latency.p50,
    p99: result.latency.p99,
    ok: result['2xx'],
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    durationSeconds: result.duration,
  };
}
