import { sql } from 'drizzle-orm';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { idempotentHandler } from '../src/fetch/index.js';
import { type ModelRequest, modelRequest } from './fixtures/fetchRequestModel.js';
import { keyHeader, user } from './fixtures/requestArbitraries.js';
import { useFetchServer } from './fixtures/useFetchServer.js';
import { rows, useDatabase } from './harness.js';
import { nodeRequest } from './httpClient.js';

/**
 * Random requests against `idempotentHandler`, over real HTTP, on real Postgres, in both
 * modes. Each request is generated from a model of what it means and written in one of
 * many spellings (query order and encoding, JSON member order and repeats, number
 * literals), so the test knows which requests idem must count as one. Whatever is sent:
 * never a 500, never SQL or a stack, idem's refusals are problem+json, nothing is stored
 * for a request that never ran, at most one run per (scope, key), a replay only for a
 * request equal to the one that ran, and a 422 only for one that differs.
 */

const NUM_RUNS = Number(process.env.FC_NUM_RUNS ?? 1_000);
const MAX_BODY_BYTES = 4_096;
const SQL_OR_STACK =
  /insert into|select |update "|idem_keys|Failed query|syntax error at|\n\s+at |\.ts:\d+|node_modules/i;
/** Not fingerprinted: tells the handler which model it is running, for the test's books. */
const MODEL_HEADER = 'x-model';

for (const mode of ['lease', 'transaction'] as const) {
  describe(`idempotentHandler in ${mode} mode: random requests over HTTP on Postgres (property)`, () => {
    const database = useDatabase('Postgres');
    /** The model each (scope, key) ran with, by `scope \u0001 key`; a second run is a failure. */
    const ranWith = new Map<string, string>();
    const runsOf = new Map<string, number>();

    const url = useFetchServer(() => {
      const options = {
        db: database().db,
        maxBodyBytes: MAX_BODY_BYTES,
        scope: (request: Request) => `user:${request.headers.get('x-user') ?? 'anonymous'}`,
        ...(mode === 'transaction' && { mode }),
      } as const;
      const ran = (request: Request, idempotency: { scope: string; key: string }) => {
        const id = `${idempotency.scope}\u0001${idempotency.key}`;
        runsOf.set(id, (runsOf.get(id) ?? 0) + 1);
        ranWith.set(id, request.headers.get(MODEL_HEADER) ?? '');
      };
      const routes: Record<string, (request: Request) => Promise<Response>> = {
        '/api/order': idempotentHandler(options, async (request, idempotency) => {
          ran(request, idempotency);
          // The app's own parsing: what it cannot read is its own 400, stored.
          const input = await request.json().catch(() => undefined);
          const { id, n } = (input ?? {}) as { id?: unknown; n?: unknown };
          if (typeof id !== 'string' || !Number.isInteger(n)) {
            return Response.json({ error: 'expected { id: string, n: integer }' }, { status: 400 });
          }
          if ((n as number) < 0) return Response.json({ error: 'sold out' }, { status: 409 });
          return Response.json({ id, n }, { status: 201, headers: { location: `/orders/${id}` } });
        }),
        '/api/note': idempotentHandler(options, async (request, idempotency) => {
          ran(request, idempotency);
          return new Response(await request.arrayBuffer(), {
            headers: { 'content-type': 'application/octet-stream' },
          });
        }),
      };
      return (request: Request) => {
        const route = routes[new URL(request.url).pathname];
        return route ? route(request) : new Response('not found', { status: 404 });
      };
    });

    const call = fc.record({ request: modelRequest, key: keyHeader, user });
    type Call = { request: ModelRequest; key: Record<string, string | string[]>; user: string };
    const send = ({ request, key, user }: Call) =>
      nodeRequest(request.method, `${url()}${request.path}${request.search}`, request.body, {
        ...key,
        'x-user': user,
        [MODEL_HEADER]: encodeURIComponent(request.identity),
        // node:http sends a DELETE's body without framing unless told its length.
        ...(request.body !== undefined && {
          'content-length': String(Buffer.byteLength(request.body)),
        }),
        ...(request.contentType !== undefined && { 'content-type': request.contentType }),
      });
    /** Where the handler books a request's run: its stored scope and its key, as idem reads them. */
    const idOf = ({ request, key, user }: Call) => {
      const sent = key['idempotency-key'];
      if (typeof sent !== 'string') return undefined;
      const bare = sent.startsWith('"')
        ? sent.slice(1, -1).replaceAll('\\"', '"').replaceAll('\\\\', '\\')
        : sent;
      return `user:${user}/${request.method} ${request.path}\u0001${bare}`;
    };

    it('never a 500 or a leak; a replay only for an equal request, a 422 only for another; at most one run per key', async () => {
      const { db } = database();
      const seen = { replays: 0, mismatches: 0 };
      await fc.assert(
        fc.asyncProperty(fc.array(call, { minLength: 1, maxLength: 3 }), async (calls) => {
          // Sent together: duplicates race, as retries do.
          const answered = await Promise.all(
            calls.map(async (sent) => ({ sent, response: await send(sent) })),
          );
          for (const { sent, response } of answered) {
            expect(response.status).toBeGreaterThanOrEqual(200);
            expect(response.status, response.text).toBeLessThan(500);
            expect(response.text).not.toMatch(SQL_OR_STACK);
            const problem =
              response.headers['content-type'] === 'application/problem+json'
                ? (JSON.parse(response.text) as { status: number; code?: string })
                : undefined;
            if ([413, 422].includes(response.status)) expect(problem).toBeDefined();
            if (problem) expect(problem.status).toBe(response.status);
            const id = idOf(sent);
            const identity = encodeURIComponent(sent.request.identity);
            if (response.headers['idempotent-replayed'] === 'true') {
              seen.replays++;
              expect(id && ranWith.get(id), 'a replay answers the request that ran').toBe(identity);
            }
            if (problem?.code === 'KEY_MISMATCH') {
              seen.mismatches++;
              expect(id && ranWith.get(id), 'a 422 refuses another request').not.toBe(identity);
            }
          }
          const touched = calls.flatMap((one) => {
            const [scope, key] = idOf(one)?.split('\u0001') ?? [];
            return scope === undefined ? [] : [sql`(scope = ${scope} and key = ${key})`];
          });
          const stored = await rows<{ scope: string; key: string; status: string }>(
            db,
            sql`select scope, key, status, version, attempts, locked_until::text from idem_keys
                  where status <> 'completed' or ${sql.join([sql`false`, ...touched], sql` or `)}`,
          );
          for (const row of stored) {
            // Every stored key belongs to a request that ran, and none is left in progress.
            expect(runsOf.get(`${row.scope}\u0001${row.key}`) ?? 0).toBe(1);
            expect(row.status, JSON.stringify(row)).toBe('completed');
          }
          for (const count of runsOf.values()) expect(count).toBe(1);
        }),
        { numRuns: NUM_RUNS },
      );
      // The property exercised what it claims to: both routes ran, replays and 422s met.
      const ranOn = (route: string) => [...ranWith.keys()].some((id) => id.includes(route));
      expect(ranOn(' /api/order')).toBe(true);
      expect(ranOn(' /api/note')).toBe(true);
      expect(seen.replays).toBeGreaterThan(0);
      expect(seen.mismatches).toBeGreaterThan(0);
    }, 600_000);
  });
}
