import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { type IdempotentHandlerOptions, idempotentHandler } from '../src/fetch/index.js';
import { useFetchServer } from './fixtures/useFetchServer.js';
import { backends, countKeys, useDatabase } from './harness.js';

/**
 * What counts as "the same request" for `idempotentHandler`, over real HTTP: the query
 * string and the exact value of each JSON number, besides method, route and body.
 */
for (const backend of backends) {
  for (const mode of ['lease', 'transaction'] as const) {
    describe(`idempotentHandler's fingerprint, ${mode} mode on ${backend}`, () => {
      const database = useDatabase(backend);
      let charges: string[] = [];

      const url = useFetchServer(() => {
        const options: IdempotentHandlerOptions = {
          db: database().db,
          scope: () => 'user:ann',
          ...(mode === 'transaction' && { mode }),
        };
        /** Charges what the query says, or the body's amount read as a bigint from its text. */
        const pay = idempotentHandler(options, async (request) => {
          const cents = new URL(request.url).searchParams.get('cents');
          const text = await request.text();
          const amount = /"amount":\s*(-?\d+)/.exec(text)?.[1];
          const charged = cents ?? amount ?? 'nothing';
          charges.push(charged);
          return Response.json({ charged });
        });
        const tracked = idempotentHandler({ ...options, fingerprintQuery: false }, async () => {
          charges.push('tracked');
          return Response.json({ charged: 'tracked' });
        });
        return (request: Request) =>
          new URL(request.url).pathname === '/tracked' ? tracked(request) : pay(request);
      });

      const post = async (path: string, key: string, body = '{}') => {
        const response = await fetch(`${url()}${path}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'idempotency-key': key },
          body,
        });
        return {
          status: response.status,
          replayed: response.headers.get('idempotent-replayed'),
          body: (await response.json()) as { charged?: string; code?: string },
        };
      };

      it('one key with another query string is 422 KEY_MISMATCH, not the first answer', async () => {
        charges = [];
        const key = randomUUID();
        const first = await post('/pay?cents=500', key);
        expect(first).toMatchObject({ status: 200, body: { charged: '500' } });
        const other = await post('/pay?cents=90000', key);
        expect(other.status).toBe(422);
        expect(other.body.code).toBe('KEY_MISMATCH');
        expect(charges).toEqual(['500']);
      });

      it('the same query however it is ordered or percent-encoded is one request: a replay', async () => {
        charges = [];
        const key = randomUUID();
        const first = await post('/pay?cents=500&note=caf%C3%A9&tag=a&tag=b', key);
        expect(first.status).toBe(200);
        const reordered = await post('/pay?tag=a&note=café&cents=%35%30%30&tag=b', key);
        expect(reordered).toMatchObject({ status: 200, replayed: 'true', body: first.body });
        // Within one name the order is the request's: tag=b&tag=a is another request.
        const swapped = await post('/pay?cents=500&note=caf%C3%A9&tag=b&tag=a', key);
        expect(swapped.status).toBe(422);
        expect(charges).toEqual(['500']);
      });

      it('a URL without a query fingerprints as before; fingerprintQuery: false ignores the query', async () => {
        charges = [];
        const key = randomUUID();
        expect((await post('/pay', key)).status).toBe(200);
        expect((await post('/pay?', key)).replayed).toBe('true');
        const tracked = randomUUID();
        expect((await post('/tracked?utm_source=mail', tracked)).status).toBe(200);
        expect((await post('/tracked?utm_source=push', tracked)).replayed).toBe('true');
        expect(charges).toEqual(['nothing', 'tracked']);
      });

      it('JSON numbers beyond 2^53 that JSON.parse reads as one double are two requests', async () => {
        charges = [];
        const key = randomUUID();
        const first = await post('/pay', key, '{"amount": 9007199254740993}');
        expect(first).toMatchObject({ status: 200, body: { charged: '9007199254740993' } });
        const other = await post('/pay', key, '{"amount": 9007199254740992}');
        expect(other.status).toBe(422);
        expect(other.body.code).toBe('KEY_MISMATCH');
        // The same number written another way is the same request.
        const respelled = await post('/pay', key, '{"amount": 9007199254740993.0e0}');
        expect(respelled).toMatchObject({ status: 200, replayed: 'true', body: first.body });
        expect(charges).toEqual(['9007199254740993']);
        expect(await countKeys(database().db, key)).toBe(1);
      });
    });
  }
}
