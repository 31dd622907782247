import { type FaultyFetchInit, faultyFetch } from '@idem/client/testing';
import { operationsIn } from '../src/server.js';

export interface LossyNetworkCounters {
  /** HTTP requests handed to the server (dropped ones included). */
  requestsSent: number;
  /** HTTP requests the server answered and whose answer was then thrown away. */
  responsesDropped: number;
  /** HTTP requests that failed before being sent. */
  failedBeforeSend: number;
  /** tRPC operations whose reply reached the client: a batch request carries several. */
  operationsAnswered: number;
}

export interface LossyNetwork {
  /** For the `fetch` option of httpLink and httpBatchLink. */
  fetch: (input: string | URL | Request, init?: FaultyFetchInit) => Promise<Response>;
  counters(): LossyNetworkCounters;
}

/**
 * `faultyFetch` from `@idem/client/testing` in front of the real `fetch`, also counting
 * the operations whose reply arrived: with httpBatchLink one dropped response loses the
 * replies of every operation in the batch.
 */
export function lossyNetwork(options: {
  dropResponseRate: number;
  failBeforeSendRate: number;
  seed: number;
}): LossyNetwork {
  let operationsAnswered = 0;
  const faulty = faultyFetch(options);
  return {
    async fetch(input, init) {
      const response = await faulty(input, init);
      operationsAnswered += operationsIn(input instanceof Request ? input.url : String(input));
      return response;
    },
    counters() {
      const { sent, dropped, failedBeforeSend } = faulty.counters;
      return {
        requestsSent: sent,
        responsesDropped: dropped,
        failedBeforeSend,
        operationsAnswered,
      };
    },
  };
}
