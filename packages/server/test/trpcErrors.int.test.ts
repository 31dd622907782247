import { randomUUID } from 'node:crypto';
import { initTRPC, TRPCError } from '@trpc/server';
import { fetchRequestHandler } from '@trpc/server/adapters/fetch';
import { sql } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import {
  type IdempotencyRequestContext,
  idempotencyContext,
  idempotent,
  withIdempotencyErrorData,
} from '../src/trpc/index.js';
import { until } from './fixtures/deferred.js';
import { useTestApp } from './fixtures/testApp.js';
import { useFetchServer } from './fixtures/useFetchServer.js';
import { backends, rows, useDatabase } from './harness.js';
import { idempotencyData, mutate, postRaw } from './httpClient.js';

const SQL_OR_STACK = /insert into|select |idem_keys|Failed query|\n\s+at |\.ts:\d+|node_modules/i;

/** `{"json":{"a":{"a":…}}}`, `depth` levels deep, written as text: no serializer recurses. */
const deepBody = (depth: number) =>
  `{"json":{"tag":"deep","payload":${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}}}`;

for (const backend of backends) {
  describe(`idempotent(): bad requests and failures answer clearly, on ${backend}`, () => {
    const app = useTestApp(backend);
    const keyed = (key: string, user = 'ann') => ({ 'Idempotency-Key': key, 'x-user': user });

    for (const path of ['echo', 'txOrder']) {
      it(`${path}: input nested 10,000 deep is a 400 that says so, and stores nothing`, async () => {
        const key = randomUUID();
        const response = await postRaw(app().url, path, deepBody(10_000), keyed(key));
        expect(response.status).toBe(400);
        expect(response.error?.message).toMatch(/nest/i);
        expect(response.error?.message).not.toContain('Maximum call stack');
        expect(response.text).not.toMatch(SQL_OR_STACK);
        expect(await app().storedKeys(key)).toBe(0);
      });
    }

    it('a principal Postgres cannot store (U+0000, an unpaired surrogate, too long) is a 400 without SQL', async () => {
      const { createCaller } = app();
      for (const [user, problem] of [
        ['ann\u0000', 'contains U+0000'],
        ['ann\uD800', 'unpaired UTF-16 surrogate'],
        ['a'.repeat(3_000), 'longer than 2048 bytes'],
      ] as const) {
        const key = randomUUID();
        const tag = randomUUID();
        const caller = createCaller({ ...idempotencyContext({ key }), user });
        const error = await caller.echo({ tag }).catch((caught: unknown) => caught);
        expect(error).toBeInstanceOf(TRPCError);
        expect(error).toMatchObject({ code: 'BAD_REQUEST' });
        expect((error as Error).message).toContain(problem);
        expect((error as Error).message).not.toMatch(SQL_OR_STACK);
        expect(app().executionsOf(tag)).toBe(0);
        expect(await app().storedKeys(key)).toBe(0);
      }
      // Over HTTP too: the principal comes from the x-user header here.
      const key = randomUUID();
      const long = await mutate(app().url, 'echo', { tag: 'x' }, keyed(key, 'u'.repeat(3_000)));
      expect(long.status).toBe(400);
      expect(long.text).not.toMatch(SQL_OR_STACK);
    });

    it('a lease lost under setTimeout(ms, v, { signal }) answers 409 LEASE_LOST with its headers, not a 500', async () => {
      const key = randomUUID();
      const tag = randomUUID();
      const { clock, gates } = app();
      const zombie = mutate(app().url, 'abortableWait', { tag }, keyed(key));
      await gates.arrived(tag);
      clock.pause(); // no more heartbeats: the 300 ms lease runs out in the database
      const takeover = await until(
        async () => {
          const response = await mutate(app().url, 'abortableWait', { tag }, keyed(key));
          return response.status === 409 ? undefined : response;
        },
        { what: 'another attempt to take the key over', intervalMs: 25 },
      );
      expect(takeover.data).toEqual({ attempt: 2 });
      clock.resume(); // the held heartbeat finds the lease gone and aborts the signal
      const lost = await zombie;
      expect(lost.status).toBe(409);
      expect(lost.error?.data.idempotency).toEqual(
        idempotencyData('LEASE_LOST', { retryAfterMs: 0 }),
      );
      expect(lost.headers.get('idempotency-status')).toBe('lease-lost');
      expect(lost.headers.get('retry-after')).toBe('0');
      const replay = await mutate(app().url, 'abortableWait', { tag }, keyed(key));
      expect(replay.text).toBe(takeover.text);
    });

    it("a plain Error is stored or released by core's rule (retryable, status), as the core README says", async () => {
      const cases = [
        { fields: { status: 402 }, stored: true },
        { fields: { retryable: false }, stored: true },
        { fields: { statusCode: 404 }, stored: true },
        { fields: { status: 429 }, stored: false },
        { fields: { status: 503 }, stored: false },
        { fields: {}, stored: false },
      ];
      for (const { fields, stored } of cases) {
        const key = randomUUID();
        const tag = randomUUID();
        const first = await mutate(app().url, 'plainError', { tag, fields }, keyed(key));
        const second = await mutate(app().url, 'plainError', { tag, fields }, keyed(key));
        expect(first.status).toBe(500);
        expect(first.error?.message).toBe(`plain failure of ${tag}`);
        expect(second.text).toBe(first.text);
        expect(second.headers.get('idempotent-replayed')).toBe(stored ? 'true' : null);
        expect(app().executionsOf(tag)).toBe(stored ? 1 : 2);
        // A released key keeps its row, in progress with its lease ended (and its steps).
        const [row] = await rows<{ status: string }>(
          app().db,
          sql`select status from idem_keys where key = ${key}`,
        );
        expect(row?.status).toBe(stored ? 'completed' : 'in_progress');
      }
    });

    it('error answers link to their documentation in data.idempotency.type', async () => {
      const tag = randomUUID();
      const key = randomUUID();
      const missing = await mutate(app().url, 'echo', { tag });
      expect(missing.error?.data.idempotency?.type).toBe(
        'https://idem-js.github.io/idem/guide/errors#invalid_key',
      );
      await mutate(app().url, 'echo', { tag }, keyed(key));
      const mismatch = await mutate(app().url, 'echo', { tag, payload: 1 }, keyed(key));
      expect(mismatch.status).toBe(422);
      expect(mismatch.error?.data.idempotency).toEqual(idempotencyData('KEY_MISMATCH'));
      const tooLarge = await mutate(
        app().url,
        'small',
        { tag, payload: 'x'.repeat(2_000) },
        keyed(randomUUID()),
      );
      expect(tooLarge.status).toBe(413);
      expect(tooLarge.error?.data.idempotency).toEqual(
        idempotencyData('INPUT_TOO_LARGE', { maxInputBytes: 1024 }),
      );
      const busyKey = randomUUID();
      const busyTag = randomUUID();
      const first = mutate(app().url, 'gated', { tag: busyTag }, keyed(busyKey));
      await app().gates.arrived(busyTag);
      const busy = await mutate(app().url, 'gated', { tag: busyTag }, keyed(busyKey));
      app().gates.open(busyTag);
      await first;
      expect(busy.status).toBe(409);
      expect(busy.error?.data.idempotency?.type).toBe(
        'https://idem-js.github.io/idem/guide/errors#request_in_progress',
      );
    });
  });
}

describe('idempotent(): with tRPC in development mode (NODE_ENV unset)', () => {
  const database = useDatabase('Postgres');
  let runs = 0;
  const url = useFetchServer(() => {
    const { db } = database();
    // isDev as tRPC derives it when NODE_ENV is unset: every error shape gets data.stack.
    const t = initTRPC.context<IdempotencyRequestContext>().create({
      isDev: true,
      errorFormatter: ({ shape, error }) =>
        withIdempotencyErrorData(shape, error, { docsUrl: 'https://docs.example.com/errors' }),
    });
    const router = t.router({
      decline: t.procedure.use(idempotent({ db, scope: () => 'user:ann' })).mutation(() => {
        runs++;
        throw new TRPCError({ code: 'PAYMENT_REQUIRED', message: 'Card declined' });
      }),
    });
    return (req: Request) =>
      fetchRequestHandler({ endpoint: '/trpc', req, router, createContext: idempotencyContext });
  });

  it('a stored error replays byte for byte, and neither answer nor row carries a stack', async () => {
    const key = randomUUID();
    const call = () => postRaw(url(), 'decline', undefined, { 'Idempotency-Key': key });
    const first = await call();
    const replay = await call();
    expect(first.status).toBe(402);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.text).toBe(first.text);
    expect(first.text).not.toContain('stack');
    expect(runs).toBe(1);
    const [row] = await rows<{ outcome: string }>(
      database().db,
      sql`select outcome::text as outcome from idem_keys where key = ${key}`,
    );
    expect(row?.outcome).toContain('Card declined');
    expect(row?.outcome).not.toMatch(/stack|\n\s+at /);
    // The docs link follows the formatter's docsUrl.
    const missing = await postRaw(url(), 'decline', undefined);
    expect(JSON.parse(missing.text).error.data.idempotency.type).toBe(
      'https://docs.example.com/errors#invalid_key',
    );
  });
});
