import superjson from 'superjson';
import { useTestApp } from '../fixtures/testApp.js';
import type { BackendName } from '../harness.js';
import type { ContractTarget, HttpAnswer, IdempotencyAnswer } from './ContractTarget.js';

const bodyOf = (answer: HttpAnswer) =>
  JSON.parse(answer.text) as {
    result?: { data: Parameters<typeof superjson.deserialize>[0] };
    error?: Parameters<typeof superjson.deserialize>[0];
  };

/** The tRPC middleware behind tRPC's fetch adapter (the test app, superjson on the wire). */
export function useTrpcTarget(backend: BackendName): () => ContractTarget {
  const app = useTestApp(backend);
  return () => {
    const current = app();
    return {
      url: current.url,
      pathOf: (route) => `/trpc/${route}`,
      // What httpLink sends with superjson for a plain JSON input.
      bodyOf: (json) => `{"json":${json}}`,
      idempotencyOf(answer) {
        const { error } = bodyOf(answer);
        if (!error) return undefined;
        const shape = superjson.deserialize(error) as {
          data: { idempotency?: IdempotencyAnswer };
        };
        return shape.data.idempotency;
      },
      resultOf(answer) {
        const { result } = bodyOf(answer);
        return result && superjson.deserialize(result.data);
      },
      executionsOf: current.executionsOf,
      gates: current.gates,
      storedKeys: current.storedKeys,
    };
  };
}
