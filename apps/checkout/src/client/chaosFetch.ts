import { type FaultyFetch, type FaultyFetchInit, faultyFetch } from '@idem/client/testing';
import { type AttemptOutcome, attemptLog } from './attemptLog';
import type { Chaos } from './chaos';

type Input = string | URL | Request;

/** Which call (a Pay press, or one of a double click's two) a request belongs to. */
export const CALL_HEADER = 'x-demo-call';

/** What happened on the wire for one request, as far as the real network saw it. */
interface Exchange {
  sent: boolean;
  /** Notes the moment it leaves the browser, after any added latency. */
  onSend: () => void;
  /** How the server answered, when its answer arrived (before chaos may drop it). */
  answer?: AttemptOutcome;
}

/**
 * The `fetch` of the checkout's mutations: `faultyFetch` from `@idem/client/testing`
 * (dropped replies, failures before sending, latency), rebuilt whenever the chaos
 * settings change, with every attempt written to the attempt log. Its view of the real
 * network tells the three failures apart: not sent, reply lost, connection died.
 */
export function chaosFetch(getChaos: () => Chaos) {
  const exchanges = new WeakMap<object, Exchange>();
  let faulty: FaultyFetch | undefined;
  let faultySettings = '';

  /** The real network, below the chaos: reads the whole answer to see what it said. */
  const network = async (input: Input, init?: RequestInit): Promise<Response> => {
    const exchange = init ? exchanges.get(init) : undefined;
    if (exchange) {
      exchange.sent = true;
      exchange.onSend();
    }
    const response = await fetch(input, init);
    // A server that died mid-reply fails here, with the browser's network TypeError.
    const body = await response.arrayBuffer();
    if (exchange) exchange.answer = await outcomeOf(response, body);
    return new Response(body, {
      status: response.status,
      statusText: response.statusText,
      headers: response.headers,
    });
  };

  return async (input: Input, init?: FaultyFetchInit): Promise<Response> => {
    const chaos = getChaos();
    const settings = JSON.stringify([
      chaos.dropRepliesPercent,
      chaos.failBeforeSendPercent,
      chaos.latencyMs,
      chaos.seed,
    ]);
    if (!faulty || settings !== faultySettings) {
      faultySettings = settings;
      faulty = faultyFetch({
        dropResponseRate: chaos.dropRepliesPercent / 100,
        failBeforeSendRate: chaos.failBeforeSendPercent / 100,
        delayMs: chaos.latencyMs,
        seed: chaos.seed,
        fetch: network,
      });
    }

    const headers = new Headers(init?.headers as HeadersInit | undefined);
    const key = headers.get('Idempotency-Key');
    const call = Number(headers.get(CALL_HEADER) ?? 1);
    const number = key ? attemptLog.send(key, call) : 0;
    const sendInit: FaultyFetchInit = { ...init };
    const exchange: Exchange = {
      sent: false,
      onSend: () => {
        if (key) attemptLog.sent(key, number);
      },
    };
    exchanges.set(sendInit, exchange);
    try {
      const response = await faulty(input, sendInit);
      if (key) attemptLog.finish(key, number, exchange.answer ?? { kind: 'executed' });
      return response;
    } catch (error) {
      if (key) attemptLog.finish(key, number, failureOf(exchange));
      throw error;
    }
  };
}

function failureOf(exchange: Exchange): AttemptOutcome {
  if (exchange.answer) {
    const answer = exchange.answer.kind;
    const serverSaid =
      answer === 'executed' || answer === 'replayed' || answer === 'in-progress' ? answer : 'error';
    return { kind: 'reply-lost', serverSaid };
  }
  return exchange.sent ? { kind: 'connection-lost' } : { kind: 'not-sent' };
}

async function outcomeOf(response: Response, body: ArrayBuffer): Promise<AttemptOutcome> {
  const replayed = response.headers.get('Idempotent-Replayed') === 'true';
  if (response.ok) return replayed ? { kind: 'replayed' } : { kind: 'executed' };
  // tRPC's error body, through superjson: { error: { json: { message, data } } }.
  let error: TRPCErrorJson = {};
  try {
    error = (JSON.parse(new TextDecoder().decode(body)) as TRPCErrorBody).error?.json ?? {};
  } catch {
    // Not tRPC's JSON (a proxy's page): the status says enough.
  }
  if (response.status === 409 && response.headers.get('Idempotency-Status')) {
    return { kind: 'in-progress', retryAfterMs: error.data?.idempotency?.retryAfterMs ?? null };
  }
  return {
    kind: 'error',
    status: response.status,
    message: error.message ?? response.statusText,
    replayed,
  };
}

interface TRPCErrorJson {
  message?: string;
  data?: { idempotency?: { retryAfterMs?: number } };
}

interface TRPCErrorBody {
  error?: { json?: TRPCErrorJson };
}
