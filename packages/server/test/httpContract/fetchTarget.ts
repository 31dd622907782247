import { afterAll, beforeAll } from 'vitest';
import { type IdempotentHandlerOptions, idempotentHandler } from '../../src/fetch/index.js';
import { type FetchServer, serveFetch } from '../../src/testing/serveFetch.js';
import { executionCounter, Gates } from '../fixtures/testApp.js';
import { type BackendName, countKeys, useDatabase } from '../harness.js';
import type { ContractTarget, IdempotencyAnswer } from './ContractTarget.js';

/**
 * `idempotentHandler` around plain Fetch handlers, one per route under `/api/`, in lease
 * mode or in transaction mode (where a duplicate waits on the key's row lock, here at most
 * 300 ms, before its 409).
 */
export function useFetchTarget(
  backend: BackendName,
  mode: 'lease' | 'transaction' = 'lease',
): () => ContractTarget {
  const database = useDatabase(backend);
  const { executions, run } = executionCounter();
  const gates = new Gates();
  let server: FetchServer | undefined;

  beforeAll(async () => {
    const { db } = database();
    const options: IdempotentHandlerOptions = {
      db,
      scope: (request: Request) => `user:${request.headers.get('x-user') ?? 'anonymous'}`,
      ...(mode === 'transaction' && { mode, inProgress: { waitMs: 300 } }),
    };
    const echo = async (request: Request, gated: boolean, attempt: number) => {
      const input = (await request.json()) as { tag: string; payload?: unknown };
      const execution = run(input.tag);
      if (gated && attempt === 1) await gates.wait(input.tag);
      return Response.json({
        tag: input.tag,
        user: request.headers.get('x-user'),
        payload: input.payload,
        execution,
        at: new Date().toISOString(),
      });
    };
    const routes: Record<string, (request: Request) => Promise<Response>> = {
      '/api/echo': idempotentHandler(options, (request, { attempt }) =>
        echo(request, false, attempt),
      ),
      '/api/gated': idempotentHandler(options, (request, { attempt }) =>
        echo(request, true, attempt),
      ),
      '/api/validated': idempotentHandler(options, async (request) => {
        const input = (await request.json()) as { tag?: unknown; cents?: unknown };
        if (typeof input.tag !== 'string' || !Number.isInteger(input.cents)) {
          return Response.json(
            { error: 'expected { tag: string, cents: integer }' },
            { status: 400 },
          );
        }
        return Response.json({ execution: run(input.tag), cents: input.cents });
      }),
    };
    server = await serveFetch((request) => {
      const route = routes[new URL(request.url).pathname];
      return route ? route(request) : new Response('not found', { status: 404 });
    });
  });
  afterAll(async () => {
    gates.openAll();
    await server?.close();
  });

  return () => {
    if (!server) throw new Error('the fetch target is not running (used outside a test?)');
    const { db } = database();
    return {
      url: server.url,
      pathOf: (route) => `/api/${route}`,
      bodyOf: (json) => json,
      idempotencyOf(answer) {
        if (answer.headers.get('content-type') !== 'application/problem+json') return undefined;
        const problem = JSON.parse(answer.text) as IdempotencyAnswer;
        return problem.code === undefined ? undefined : problem;
      },
      resultOf: (answer) => JSON.parse(answer.text),
      executionsOf: (tag) => executions.get(tag) ?? 0,
      gates,
      storedKeys: (key) => countKeys(db, key),
    };
  };
}
