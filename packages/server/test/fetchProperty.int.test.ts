import { sql } from 'drizzle-orm';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idempotentHandler } from '../src/fetch/index.js';
import { type FetchServer, serveFetch } from '../src/testing/serveFetch.js';
import { keyHeader, user } from './fixtures/requestArbitraries.js';
import { rows, useDatabase } from './harness.js';
import { nodePost } from './httpClient.js';

/**
 * Random requests against `idempotentHandler`, over real HTTP, on real Postgres: whatever
 * the body, its type, the key's spelling or the route, the answer is never a 500 and never
 * shows SQL or a stack, idem's refusals are problem+json, nothing is stored for a request
 * that never ran, and no (scope, key) runs twice.
 */

const NUM_RUNS = Number(process.env.FC_NUM_RUNS ?? 150);
const MAX_BODY_BYTES = 4_096;
const SQL_OR_STACK =
  /insert into|select |update "|idem_keys|Failed query|syntax error at|\n\s+at |\.ts:\d+|node_modules/i;

/** Each run of a handler, by `scope \u0001 key`. */
const executions = new Map<string, number>();
const ran = (idempotency: { scope: string; key: string }) => {
  const id = `${idempotency.scope}\u0001${idempotency.key}`;
  executions.set(id, (executions.get(id) ?? 0) + 1);
};

function createRoutes(db: ReturnType<ReturnType<typeof useDatabase>>['db']) {
  const options = {
    db,
    maxBodyBytes: MAX_BODY_BYTES,
    scope: (request: Request) => `user:${request.headers.get('x-user') ?? 'anonymous'}`,
  };
  const routes: Record<string, (request: Request) => Promise<Response>> = {
    '/api/order': idempotentHandler(options, async (request, idempotency) => {
      ran(idempotency);
      // The app's own parsing: a body that is not JSON (sent without a JSON content type,
      // which idem would have refused) is this handler's 400.
      const input = await request.json().catch(() => undefined);
      const { id, n } = (input ?? {}) as { id?: unknown; n?: unknown };
      if (typeof id !== 'string' || !Number.isInteger(n)) {
        return Response.json({ error: 'expected { id: string, n: integer }' }, { status: 400 });
      }
      if ((n as number) < 0) return Response.json({ error: 'sold out' }, { status: 409 });
      return Response.json({ id, n }, { status: 201, headers: { location: `/orders/${id}` } });
    }),
    '/api/note': idempotentHandler(options, async (request, idempotency) => {
      ran(idempotency);
      return new Response(await request.arrayBuffer(), {
        headers: { 'content-type': 'application/octet-stream' },
      });
    }),
  };
  return (request: Request) => {
    const route = routes[new URL(request.url).pathname];
    return route ? route(request) : Promise.resolve(new Response('not found', { status: 404 }));
  };
}

/** POSTs with node:http, which can send two header lines and Latin-1 bytes. */
function post(
  url: string,
  path: string,
  body: string | Buffer | undefined,
  headers: Record<string, string | string[]>,
): Promise<{ status: number; text: string; contentType: string | undefined }> {
  return nodePost(`${url}${path}`, body, headers).then(({ status, text, headers }) => ({
    status,
    text,
    contentType: headers['content-type'],
  }));
}

const path = fc.oneof(
  { weight: 8, arbitrary: fc.constantFrom('/api/order', '/api/note') },
  fc.constant('/api/nope'),
);
const contentType = fc.constantFrom(
  'application/json',
  'application/json; charset=utf-8',
  'application/vnd.api+json',
  'text/plain',
  undefined,
);
const deep = (depth: number) => `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
const validInput = fc.record({ id: fc.constantFrom('a', 'b'), n: fc.integer({ min: -1, max: 2 }) });
const body = fc.oneof(
  { weight: 8, arbitrary: validInput.map((input) => JSON.stringify(input)) },
  validInput.map((input) => JSON.stringify(input).slice(0, -1)), // malformed JSON
  fc.jsonValue({ maxDepth: 3 }).map((value) => JSON.stringify(value)),
  fc.constantFrom(500, 1_500, 10_000).map(deep), // deep nesting
  fc.constant(JSON.stringify({ id: 'a', n: 1, pad: 'x'.repeat(MAX_BODY_BYTES) })), // too large
  fc.uint8Array({ maxLength: 64 }).map((bytes) => Buffer.from(bytes)), // any bytes
  fc.constant(undefined), // empty
);
const call = fc.record({ path, body, key: keyHeader, user, contentType });

describe('idempotentHandler: random requests over HTTP on Postgres (property)', () => {
  const database = useDatabase('Postgres');
  let server: FetchServer | undefined;
  beforeAll(async () => {
    server = await serveFetch(createRoutes(database().db));
  });
  afterAll(async () => {
    await server?.close();
  });

  it('never a 500, never SQL or a stack, problem+json refusals, nothing stored that never ran, at most one run per key', async () => {
    const { db } = database();
    await fc.assert(
      fc.asyncProperty(fc.array(call, { minLength: 1, maxLength: 3 }), async (calls) => {
        // Sent together: duplicates race, as retries do.
        const responses = await Promise.all(
          calls.map((one) =>
            post(server!.url, one.path, one.body, {
              ...one.key,
              'x-user': one.user,
              ...(one.contentType !== undefined && { 'content-type': one.contentType }),
            }),
          ),
        );
        for (const response of responses) {
          expect(response.status).toBeGreaterThanOrEqual(200);
          expect(response.status, response.text).toBeLessThan(500);
          expect(response.text).not.toMatch(SQL_OR_STACK);
          if ([413, 422].includes(response.status)) {
            expect(response.contentType).toBe('application/problem+json');
          }
          if (response.contentType === 'application/problem+json') {
            const problem = JSON.parse(response.text);
            expect(problem.status).toBe(response.status);
            expect(typeof problem.type).toBe('string');
            expect(typeof problem.title).toBe('string');
            expect(typeof problem.detail).toBe('string');
          }
        }
        const stored = await rows<{ scope: string; key: string; status: string }>(
          db,
          sql`select scope, key, status from idem_keys`,
        );
        for (const row of stored) {
          // Every stored key belongs to a request that ran, and none is left in progress.
          expect(executions.get(`${row.scope}\u0001${row.key}`) ?? 0).toBe(1);
          expect(row.status).toBe('completed');
        }
        for (const count of executions.values()) expect(count).toBe(1);
      }),
      { numRuns: NUM_RUNS },
    );
    // The property exercised what it claims to: both routes ran.
    const ranOn = (route: string) => [...executions.keys()].some((id) => id.includes(route));
    expect(ranOn('POST /api/order')).toBe(true);
    expect(ranOn('POST /api/note')).toBe(true);
  }, 240_000);
});
