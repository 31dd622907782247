import { randomUUID } from 'node:crypto';
import { SpanStatusCode } from '@opentelemetry/api';
import { initTRPC, TRPCError } from '@trpc/server';
import { fetchRequestHandler } from '@trpc/server/adapters/fetch';
import { sql } from 'drizzle-orm';
import superjson from 'superjson';
import { afterEach, describe, expect, it } from 'vitest';
import { idempotencyTelemetry } from '../src/otel/index.js';
import type { PgDatabaseLike } from '../src/postgres/PgDatabaseLike.js';
import { type FetchServer, serveFetch } from '../src/testing/serveFetch.js';
import {
  type IdempotencyRequestContext,
  idempotencyContext,
  idempotent,
  withIdempotencyErrorData,
} from '../src/trpc/index.js';
import { until } from './fixtures/deferred.js';
import { pausableClock } from './fixtures/pausableClock.js';
import { Gates } from './fixtures/testApp.js';
import { backends, useDatabase } from './harness.js';
import { mutate } from './httpClient.js';
import { type OtelHarness, otelHarness } from './otelHarness.js';

interface Context extends IdempotencyRequestContext {
  principal: string;
}

interface OrderInput {
  tag: string;
  /** `declined`: a stored business error; `transient`: the first run fails and is released. */
  outcome?: 'ok' | 'declined' | 'transient';
  gate?: boolean;
}

/** The principal every call acts for: a `/` in it must not leak into `rpc.method`. */
const PRINCIPAL = 'tenant:acme/user:alice';

/**
 * A tRPC app whose idempotent procedures report to `idempotencyTelemetry` on the test's own
 * SDK, served over real HTTP: the events come from the real middleware on a real database.
 */
async function startApp(db: PgDatabaseLike, otel: OtelHarness) {
  const telemetry = idempotencyTelemetry({
    meterProvider: otel.meterProvider,
    tracerProvider: otel.tracerProvider,
  });
  const gates = new Gates();
  const clock = pausableClock();
  const runs = new Map<string, number>();
  const run = (tag: string) => {
    const count = (runs.get(tag) ?? 0) + 1;
    runs.set(tag, count);
    return count;
  };
  const t = initTRPC.context<Context>().create({
    transformer: superjson,
    isDev: false,
    errorFormatter: ({ shape, error }) => withIdempotencyErrorData(shape, error),
  });
  const scope = ({ ctx }: { ctx: Context }) => ctx.principal;
  const lease = t.procedure.use(idempotent({ db, scope, onEvent: telemetry.onEvent }));
  const router = t.router({
    orders: t.router({
      create: lease
        .input((value) => value as OrderInput)
        .mutation(async ({ ctx, input }) => {
          const execution = run(input.tag);
          if (input.gate && ctx.idempotency.attempt === 1) await gates.wait(input.tag);
          if (input.outcome === 'declined') {
            throw new TRPCError({ code: 'PAYMENT_REQUIRED', message: 'The card was declined' });
          }
          if (input.outcome === 'transient' && execution === 1) {
            throw new Error('connection to the payment network lost');
          }
          return { execution };
        }),
      record: t.procedure
        .use(idempotent({ mode: 'transaction', db, scope, onEvent: telemetry.onEvent }))
        .input((value) => value as { tag: string })
        .mutation(async ({ ctx, input }) => {
          await ctx.idempotency.tx.execute(sql`select 1`);
          return { execution: run(input.tag) };
        }),
      zombie: t.procedure
        .use(
          idempotent({
            db,
            scope,
            onEvent: telemetry.onEvent,
            clock,
            leaseMs: 300,
            ttlMs: 60_000,
          }),
        )
        .input((value) => value as { tag: string })
        .mutation(async ({ ctx, input }) => {
          if (ctx.idempotency.attempt === 1) await gates.wait(input.tag);
          return { attempt: ctx.idempotency.attempt };
        }),
    }),
  });
  const server: FetchServer = await serveFetch((req) =>
    fetchRequestHandler({
      endpoint: '/trpc',
      req,
      router,
      createContext: (opts) => ({ ...idempotencyContext(opts), principal: PRINCIPAL }),
    }),
  );
  return {
    gates,
    clock,
    call: (path: string, input: unknown, key: string) =>
      mutate(server.url, path, input, { 'Idempotency-Key': key }),
    close: async () => {
      gates.openAll();
      clock.resume();
      await server.close();
    },
  };
}

const LEASE_ORDER = {
  'rpc.system': 'trpc',
  'rpc.system.name': 'trpc',
  'rpc.method': 'orders.create',
  'idem.mode': 'lease',
};

for (const backend of backends) {
  describe(`idempotencyTelemetry through idempotent() over HTTP on ${backend}`, () => {
    const database = useDatabase(backend);
    const cleanups: (() => Promise<void>)[] = [];
    afterEach(async () => {
      for (const cleanup of cleanups.splice(0)) await cleanup();
    });
    const setUp = async () => {
      const otel = otelHarness();
      const app = await startApp(database().db, otel);
      cleanups.push(app.close, otel.shutdown);
      return { otel, app };
    };

    it('idem.key.claims: one per first claim, by procedure and mode, without key or principal', async () => {
      const { otel, app } = await setUp();
      const key = randomUUID();
      expect((await app.call('orders.create', { tag: randomUUID() }, key)).status).toBe(200);
      expect((await app.call('orders.create', { tag: randomUUID() }, randomUUID())).status).toBe(
        200,
      );
      const points = await otel.points('idem.key.claims');
      expect(points).toEqual([{ attributes: LEASE_ORDER, value: 2 }]);
      // Neither the key nor the principal is a metric attribute (cardinality, PII).
      const everything = JSON.stringify(
        await Promise.all(
          ['idem.key.claims', 'idem.key.completions', 'idem.key.duration'].map(otel.points),
        ),
      );
      expect(everything).not.toContain(key);
      expect(everything).not.toContain('alice');
      expect(everything).not.toContain('acme');
    });

    it('idem.key.completions: stored successes and stored errors, with error.type', async () => {
      const { otel, app } = await setUp();
      expect((await app.call('orders.create', { tag: randomUUID() }, randomUUID())).status).toBe(
        200,
      );
      const declined = await app.call(
        'orders.create',
        { tag: randomUUID(), outcome: 'declined' },
        randomUUID(),
      );
      expect(declined.status).toBe(402);
      const points = await otel.points('idem.key.completions');
      expect(points).toHaveLength(2);
      expect(points).toContainEqual({ attributes: LEASE_ORDER, value: 1 });
      expect(points).toContainEqual({
        attributes: { ...LEASE_ORDER, 'error.type': 'PAYMENT_REQUIRED' },
        value: 1,
      });
    });

    it('idem.key.replays: a repeated key answered from the store', async () => {
      const { otel, app } = await setUp();
      const key = randomUUID();
      const input = { tag: randomUUID() };
      await app.call('orders.create', input, key);
      const replay = await app.call('orders.create', input, key);
      const again = await app.call('orders.create', input, key);
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(await otel.points('idem.key.replays')).toEqual([
        { attributes: LEASE_ORDER, value: 2 },
      ]);
      expect(await otel.total('idem.key.claims')).toBe(1);
    });

    it('idem.key.mismatches: a key reused with another input (422)', async () => {
      const { otel, app } = await setUp();
      const key = randomUUID();
      await app.call('orders.create', { tag: randomUUID() }, key);
      const other = await app.call('orders.create', { tag: randomUUID() }, key);
      expect(other.status).toBe(422);
      expect(await otel.points('idem.key.mismatches')).toEqual([
        { attributes: LEASE_ORDER, value: 1 },
      ]);
    });

    it('idem.key.in_progress: a duplicate while the first call runs (409)', async () => {
      const { otel, app } = await setUp();
      const key = randomUUID();
      const input = { tag: randomUUID(), gate: true };
      const first = app.call('orders.create', input, key);
      await app.gates.arrived(input.tag);
      const duplicate = await app.call('orders.create', input, key);
      expect(duplicate.status).toBe(409);
      expect(await otel.points('idem.key.in_progress')).toEqual([
        { attributes: LEASE_ORDER, value: 1 },
      ]);
      app.gates.open(input.tag);
      expect((await first).status).toBe(200);
    });

    it('idem.key.releases and idem.key.takeovers: a transient failure frees the key, the retry takes it over', async () => {
      const { otel, app } = await setUp();
      const key = randomUUID();
      const input = { tag: randomUUID(), outcome: 'transient' };
      expect((await app.call('orders.create', input, key)).status).toBe(500);
      expect(await otel.points('idem.key.releases')).toEqual([
        { attributes: { ...LEASE_ORDER, 'error.type': 'INTERNAL_SERVER_ERROR' }, value: 1 },
      ]);
      expect(await otel.total('idem.key.takeovers')).toBe(0);

      const retry = await app.call('orders.create', input, key);
      expect(retry.status).toBe(200);
      expect(retry.data).toEqual({ execution: 2 });
      expect(await otel.points('idem.key.takeovers')).toEqual([
        { attributes: LEASE_ORDER, value: 1 },
      ]);
      expect(await otel.total('idem.key.claims')).toBe(1);
      expect(await otel.total('idem.key.completions')).toBe(1);
    });

    it('idem.key.lease_losses: a paused holder whose key was taken over writes nothing', async () => {
      const { otel, app } = await setUp();
      const key = randomUUID();
      const input = { tag: randomUUID() };
      const zombie = app.call('orders.zombie', input, key);
      await app.gates.arrived(input.tag);
      app.clock.pause(); // no heartbeats: the 300 ms lease runs out in the database
      const takeover = await until(
        async () => {
          const response = await app.call('orders.zombie', input, key);
          return response.status === 409 ? undefined : response;
        },
        { what: 'another attempt to take the key over', intervalMs: 25, timeoutMs: 60_000 },
      );
      expect(takeover.data).toEqual({ attempt: 2 });
      app.clock.resume();
      app.gates.open(input.tag);
      expect((await zombie).status).toBe(409);
      const zombieOrder = { ...LEASE_ORDER, 'rpc.method': 'orders.zombie' };
      expect(await otel.points('idem.key.lease_losses')).toEqual([
        { attributes: { ...zombieOrder, 'error.type': 'LEASE_LOST' }, value: 1 },
      ]);
      expect(await otel.total('idem.key.takeovers')).toBe(1);
    });

    it('idem.key.duration: one value per call, by mode, procedure and outcome, in seconds', async () => {
      const { otel, app } = await setUp();
      const started = performance.now();
      const key = randomUUID();
      const input = { tag: randomUUID() };
      await app.call('orders.create', input, key);
      await app.call('orders.create', input, key);
      const recordKey = randomUUID();
      expect((await app.call('orders.record', { tag: 'r' }, recordKey)).status).toBe(200);
      expect((await app.call('orders.record', { tag: 'r' }, recordKey)).status).toBe(200);
      expect((await app.call('orders.record', { tag: 'other' }, recordKey)).status).toBe(422);
      const elapsedSeconds = (performance.now() - started) / 1_000;

      const points = await otel.points('idem.key.duration');
      const transaction = {
        ...LEASE_ORDER,
        'rpc.method': 'orders.record',
        'idem.mode': 'transaction',
      };
      const byOutcome = points.map((point) => ({
        attributes: point.attributes,
        count: point.count,
      }));
      expect(byOutcome).toHaveLength(5);
      expect(byOutcome).toEqual(
        expect.arrayContaining([
          { attributes: { ...LEASE_ORDER, 'idem.outcome': 'executed' }, count: 1 },
          { attributes: { ...LEASE_ORDER, 'idem.outcome': 'replayed' }, count: 1 },
          { attributes: { ...transaction, 'idem.outcome': 'executed' }, count: 1 },
          { attributes: { ...transaction, 'idem.outcome': 'replayed' }, count: 1 },
          { attributes: { ...transaction, 'idem.outcome': 'mismatch' }, count: 1 },
        ]),
      );
      for (const point of points) {
        expect(point.sum).toBeGreaterThanOrEqual(0);
        expect(point.sum).toBeLessThanOrEqual(elapsedSeconds);
      }
      // Transaction mode counts claims and replays too.
      expect(await otel.total('idem.key.claims', { 'idem.mode': 'transaction' })).toBe(1);
      expect(await otel.total('idem.key.replays', { 'idem.mode': 'transaction' })).toBe(1);
    });

    it('spans: one per call, named after the procedure, with the outcome and the key but not the principal', async () => {
      const { otel, app } = await setUp();
      const key = randomUUID();
      const input = { tag: randomUUID() };
      const before = Date.now();
      await app.call('orders.create', input, key);
      await app.call('orders.create', input, key);
      const failedKey = randomUUID();
      await app.call('orders.create', { tag: randomUUID(), outcome: 'transient' }, failedKey);
      const after = Date.now();

      const spans = otel.spans();
      expect(spans.map((span) => span.name)).toEqual([
        'idempotent orders.create',
        'idempotent orders.create',
        'idempotent orders.create',
      ]);
      const [executed, replayed, released] = spans;
      expect(executed?.attributes).toEqual({
        ...LEASE_ORDER,
        'idem.outcome': 'executed',
        'idem.key': key,
        'idem.version': 1,
      });
      expect(executed?.status.code).toBe(SpanStatusCode.UNSET);
      expect(replayed?.attributes).toMatchObject({ 'idem.outcome': 'replayed', 'idem.key': key });
      expect(released?.attributes).toMatchObject({
        'idem.outcome': 'released',
        'idem.key': failedKey,
        'error.type': 'INTERNAL_SERVER_ERROR',
      });
      expect(released?.status).toEqual({
        code: SpanStatusCode.ERROR,
        message: 'INTERNAL_SERVER_ERROR',
      });
      expect(released?.events.map((event) => event.name)).toEqual(['exception']);
      for (const span of spans) {
        expect(span.kind).toBe(0); // INTERNAL
        expect(JSON.stringify(span.attributes)).not.toContain('alice');
        const startMs = span.startTime[0] * 1_000 + span.startTime[1] / 1e6;
        const endMs = span.endTime[0] * 1_000 + span.endTime[1] / 1e6;
        expect(startMs).toBeGreaterThanOrEqual(before - 1);
        expect(endMs).toBeGreaterThanOrEqual(startMs);
        expect(endMs).toBeLessThanOrEqual(after + 1);
      }
    });
  });
}

describe('idempotencyTelemetry without an SDK', () => {
  it('is a no-op through the global API, and a throwing procedureOf never reaches the caller', () => {
    const telemetry = idempotencyTelemetry();
    expect(() =>
      telemetry.onEvent({ type: 'claimed', scope: 'u/orders.create', key: 'k', durationMs: 1 }),
    ).not.toThrow();
    const broken = idempotencyTelemetry({
      procedureOf: () => {
        throw new Error('boom');
      },
    });
    expect(() =>
      broken.onEvent({ type: 'completed', scope: 'u/orders.create', key: 'k', durationMs: 1 }),
    ).not.toThrow();
  });
});
