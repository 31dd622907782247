import { seededRandom } from '@idem/core/testing';

/** The real `fetch` that faultyFetch sends through (the global `fetch` fits). */
export type FetchFunction = (
  input: string | URL | Request,
  init?: RequestInit,
) => Promise<Response>;

/**
 * `RequestInit` as tRPC's links pass it: with `exactOptionalPropertyTypes`, tRPC's
 * `signal?: AbortSignal | undefined` is not a `RequestInit`, so faultyFetch accepts both.
 */
export type FaultyFetchInit = Omit<RequestInit, 'signal'> & {
  signal?: AbortSignal | null | undefined;
};

export interface FaultyFetchOptions {
  /**
   * Share of requests, 0–1, that are sent and fully processed by the server, and whose
   * response is then thrown away: the caller gets the network error it would get if the
   * connection died on the way back. The case idempotency keys exist for.
   * @default 0
   */
  dropResponseRate?: number;
  /**
   * Share of requests, 0–1, that are sent and fully processed by the server, and whose
   * response then never arrives: the call stays pending until `init.signal` aborts (and
   * rejects with its reason), as over a connection that went silent. What a per-attempt
   * timeout (`keyedRetryLink`'s `attemptTimeoutMs`) is for. `dropResponseRate +
   * hangRate` is at most 1.
   * @default 0
   */
  hangRate?: number;
  /**
   * Share of requests, 0–1, that fail with a network error without being sent.
   * @default 0
   */
  failBeforeSendRate?: number;
  /**
   * Latency added before each request is sent (or fails before sending): a fixed number
   * of ms, or `[minMs, maxMs]` for a seeded uniform draw per request.
   * @default 0
   */
  delayMs?: number | readonly [minMs: number, maxMs: number];
  /**
   * Seed of the random draws. The same seed and the same order of calls give the same
   * faults, on any machine.
   * @default 1
   */
  seed?: number;
  /**
   * The fetch that really sends. Looked up on each call when omitted, so a test may stub
   * `globalThis.fetch` after creating this.
   * @default globalThis.fetch
   */
  fetch?: FetchFunction;
}

/** What a faultyFetch has done so far. */
export interface FaultyFetchCounters {
  /** Requests handed to the real fetch (the dropped ones included). */
  sent: number;
  /** Sent requests whose response was thrown away. */
  dropped: number;
  /** Requests that failed without being sent. */
  failedBeforeSend: number;
  /** Sent requests whose response never arrived (pending until aborted). */
  hung: number;
}

/** A `fetch` usable as the global one and as the `fetch` option of tRPC's HTTP links. */
export interface FaultyFetch {
  (input: string | URL | Request, init?: FaultyFetchInit): Promise<Response>;
  /** What it has done so far (a snapshot: read the property again for fresh numbers). */
  readonly counters: FaultyFetchCounters;
}

/**
 * A `fetch` that injects the failures a real network has, deterministically, for tests:
 *
 * - drop response (`dropResponseRate`): the request IS sent and the server runs it; the
 *   response, body included, is read and then discarded, and the caller gets a
 *   `TypeError('fetch failed')` like a reset connection gives. From the client's side the
 *   outcome is unknown, which is exactly when only an idempotency key makes a retry safe;
 * - hang (`hangRate`): the request IS sent and the server runs it, but the response never
 *   comes: the promise settles only when `init.signal` aborts;
 * - fail before send (`failBeforeSendRate`): a `TypeError` without sending anything;
 * - delay (`delayMs`): latency before each request; an abort of `init.signal` during it
 *   rejects at once.
 *
 * Each call draws the same three random numbers (fail, drop-or-hang, delay) from a seeded
 * PRNG, whatever happens, so the faults depend only on the seed and the order of calls
 * (and a seed gives the same drops with or without `hangRate`).
 *
 * @example
 * const fetch = faultyFetch({ dropResponseRate: 0.3, failBeforeSendRate: 0.1, seed: 42 });
 * httpLink({ url, fetch, headers: idempotencyHeaders });
 */
export function faultyFetch(options: FaultyFetchOptions = {}): FaultyFetch {
  const dropResponseRate = rate('dropResponseRate', options.dropResponseRate ?? 0);
  const hangRate = rate('hangRate', options.hangRate ?? 0);
  if (dropResponseRate + hangRate > 1) {
    throw new RangeError(
      `faultyFetch: dropResponseRate + hangRate must be at most 1; got ${dropResponseRate} + ${hangRate}.`,
    );
  }
  const failBeforeSendRate = rate('failBeforeSendRate', options.failBeforeSendRate ?? 0);
  const [minDelayMs, maxDelayMs] = delayRange(options.delayMs ?? 0);
  const random = seededRandom(options.seed ?? 1);
  const counters: FaultyFetchCounters = { sent: 0, dropped: 0, failedBeforeSend: 0, hung: 0 };

  const faulty = async (
    input: string | URL | Request,
    init?: FaultyFetchInit,
  ): Promise<Response> => {
    const failDraw = random();
    const dropDraw = random();
    const delayDraw = random();
    const signal = init?.signal ?? (input instanceof Request ? input.signal : undefined);

    const waitMs = minDelayMs + delayDraw * (maxDelayMs - minDelayMs);
    if (waitMs > 0) await sleep(waitMs, signal ?? undefined);
    signal?.throwIfAborted();

    if (failDraw < failBeforeSendRate) {
      counters.failedBeforeSend += 1;
      throw networkError('the request failed before it was sent');
    }

    counters.sent += 1;
    const send = options.fetch ?? globalThis.fetch;
    // An absent signal is `undefined` (tRPC) or `null` (RequestInit): fetch takes either.
    const response = await send(input, init as RequestInit | undefined);
    const hangs = dropDraw >= dropResponseRate && dropDraw < dropResponseRate + hangRate;
    if (dropDraw < dropResponseRate || hangs) {
      // Read the whole body first: the server has then finished the request (a streamed
      // reply included), so "dropped" really means "ran on the server, lost on the way".
      await response.arrayBuffer();
      if (hangs) {
        counters.hung += 1;
        return waitForAbort(signal ?? undefined);
      }
      counters.dropped += 1;
      throw networkError('the response was dropped after the server processed the request');
    }
    return response;
  };

  return Object.defineProperty(faulty, 'counters', {
    get: (): FaultyFetchCounters => ({ ...counters }),
    enumerable: true,
  }) as FaultyFetch;
}

/** What `fetch` rejects with when the network fails (undici's message; browsers differ). */
function networkError(detail: string): TypeError {
  return new TypeError('fetch failed', { cause: new Error(`faultyFetch: ${detail}`) });
}

/** Never resolves; rejects with the signal's reason once it aborts (never without one). */
function waitForAbort(signal: AbortSignal | undefined): Promise<never> {
  return new Promise((_resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    signal?.addEventListener('abort', () => reject(signal.reason), { once: true });
  });
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

function rate(name: string, value: number): number {
  if (!(value >= 0 && value <= 1)) {
    throw new RangeError(`faultyFetch: ${name} must be a number from 0 to 1; got ${value}.`);
  }
  return value;
}

function delayRange(delayMs: number | readonly [number, number]): [number, number] {
  const [min, max] = typeof delayMs === 'number' ? [delayMs, delayMs] : delayMs;
  if (!(Number.isFinite(min) && Number.isFinite(max) && min >= 0 && max >= min)) {
    throw new RangeError(
      `faultyFetch: delayMs must be a number of ms, 0 or more, or [minMs, maxMs] with ` +
        `0 ≤ minMs ≤ maxMs; got ${JSON.stringify(delayMs)}.`,
    );
  }
  return [min, max];
}
