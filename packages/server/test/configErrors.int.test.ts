import { randomUUID } from 'node:crypto';
import { createServer } from 'node:net';
import { PGlite } from '@electric-sql/pglite';
import { isConfigurationError } from '@idem/core';
import { initTRPC } from '@trpc/server';
import { fetchRequestHandler } from '@trpc/server/adapters/fetch';
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite';
import { drizzle as drizzlePostgres } from 'drizzle-orm/postgres-js';
import postgres from 'postgres';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import type { StoreErrorReport } from '../src/adapter/KeyedOptions.js';
import { idempotentHandler } from '../src/fetch/index.js';
import { createInboxSweeper } from '../src/outbox/inbox/createInboxSweeper.js';
import { idempotentConsumer } from '../src/outbox/inbox/idempotentConsumer.js';
import { inProcessPublisher } from '../src/outbox/publishers/inProcessPublisher.js';
import { createRelay } from '../src/outbox/relay/createRelay.js';
import type { PgDatabaseLike } from '../src/postgres/PgDatabaseLike.js';
import { sweepExpired } from '../src/postgres/sweeper.js';
import {
  type IdempotencyRequestContext,
  idempotencyContext,
  idempotent,
  withIdempotencyErrorData,
} from '../src/trpc/index.js';
import { backends, connect, createScratchDatabase } from './harness.js';
import { events } from './outbox/fixtures.js';

/** What no answer may show: SQL, table names, the driver's words, a stack. */
const SQL_OR_STACK =
  /insert into|select |idem_keys|relation|Failed query|ECONNREFUSED|\n\s+at |\.ts:\d+|node_modules/i;

type Adapter = 'tRPC' | 'Fetch';
type Mode = 'lease' | 'transaction';
const CALLS = [
  ['tRPC', 'lease'],
  ['tRPC', 'transaction'],
  ['Fetch', 'lease'],
  ['Fetch', 'transaction'],
] as const satisfies readonly (readonly [Adapter, Mode])[];

/** One answer, as a client reads it: status, idem's code, the message, the whole body. */
interface Answer {
  status: number;
  code: string | undefined;
  message: string;
  text: string;
}

/** What `onStoreError` heard. */
type Heard = { error: unknown; report: StoreErrorReport }[];

interface CallOptions {
  db: PgDatabaseLike;
  key: string;
  /** Listens with `onStoreError` when given; the default report otherwise. */
  heard?: Heard;
  /** Counts the handler's runs. */
  runs: { count: number };
}

/** One keyed call through `adapter` in `mode` on `db`, as a client sees its answer. */
async function call(adapter: Adapter, mode: Mode, options: CallOptions): Promise<Answer> {
  const { db, key, heard, runs } = options;
  const onStoreError = heard && {
    onStoreError: (error: unknown, report: StoreErrorReport) => {
      heard.push({ error, report });
    },
  };
  const scope = () => 'ann';
  if (adapter === 'Fetch') {
    const handler = idempotentHandler({ mode, db, scope, ...onStoreError }, () => {
      runs.count += 1;
      return new Response('ran');
    });
    const response = await handler(
      new Request('http://shop.test/pay', { method: 'POST', headers: { 'idempotency-key': key } }),
    );
    const text = await response.text();
    expect(response.headers.get('content-type')).toBe('application/problem+json');
    const problem = JSON.parse(text) as { code?: string; detail: string };
    return { status: response.status, code: problem.code, message: problem.detail, text };
  }
  const t = initTRPC.context<IdempotencyRequestContext>().create({
    isDev: true,
    errorFormatter: ({ shape, error }) => withIdempotencyErrorData(shape, error),
  });
  const run = () => {
    runs.count += 1;
    return 'ran';
  };
  const router = t.router({
    pay:
      mode === 'lease'
        ? t.procedure.use(idempotent({ db, scope, ...onStoreError })).mutation(run)
        : t.procedure
            .use(idempotent({ mode: 'transaction', db, scope, ...onStoreError }))
            .mutation(run),
  });
  const response = await fetchRequestHandler({
    endpoint: '/trpc',
    router,
    createContext: idempotencyContext,
    req: new Request('http://localhost/trpc/pay', {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'Idempotency-Key': key },
    }),
  });
  const text = await response.text();
  const { error } = JSON.parse(text) as {
    error: { message: string; data: { idempotency?: { code: string } } };
  };
  return {
    status: response.status,
    code: error.data.idempotency?.code,
    message: error.message,
    text,
  };
}

/** The messages and codes down `error`'s chain of causes. */
function causeChain(error: unknown): { message: string; code: unknown }[] {
  const chain: { message: string; code: unknown }[] = [];
  for (let current = error; current instanceof Error; current = current.cause) {
    chain.push({ message: current.message, code: (current as { code?: unknown }).code });
  }
  return chain;
}

/** A database with none of idem's tables: PGlite in memory, or a scratch database. */
function useUnmigratedDatabase(backend: (typeof backends)[number]): () => PgDatabaseLike {
  let opened: { db: PgDatabaseLike; close: () => Promise<void> } | undefined;
  beforeAll(async () => {
    if (backend === 'PGlite') {
      const client = new PGlite();
      opened = { db: drizzlePglite(client), close: () => client.close() };
      return;
    }
    const scratch = await createScratchDatabase();
    const db = connect(scratch.url, 2);
    opened = {
      db,
      close: async () => {
        await db.$client.end({ timeout: 5 });
        await scratch.drop();
      },
    };
  });
  afterAll(async () => {
    await opened?.close();
  });
  return () => {
    if (!opened) throw new Error(`the unmigrated ${backend} database is not open`);
    return opened.db;
  };
}

afterEach(() => {
  vi.restoreAllMocks();
});

for (const backend of backends) {
  describe(`a database where migrate(db) was not run, on ${backend}`, () => {
    const database = useUnmigratedDatabase(backend);

    for (const [adapter, mode] of CALLS) {
      it(`${adapter}, ${mode} mode: 500 INVALID_CONFIGURATION naming migrate(db), told once to onStoreError`, async () => {
        const heard: Heard = [];
        const runs = { count: 0 };
        const key = randomUUID();
        const answer = await call(adapter, mode, { db: database(), key, heard, runs });
        expect(answer).toMatchObject({ status: 500, code: 'INVALID_CONFIGURATION' });
        expect(answer.message).toContain('`migrate(db)` from `@idem/server/postgres`');
        expect(answer.message).not.toMatch(/retry the call/i);
        expect(answer.text).not.toMatch(SQL_OR_STACK);
        expect(runs.count).toBe(0);
        expect(heard).toHaveLength(1);
        const [{ error, report }] = heard as [Heard[number]];
        expect(report).toEqual({
          code: 'INVALID_CONFIGURATION',
          message: answer.message,
          scope: adapter === 'tRPC' ? 'ann/pay' : 'ann/POST /pay',
          key,
          mode,
        });
        expect(causeChain(error)).toContainEqual({
          message: 'relation "idem_keys" does not exist',
          code: '42P01',
        });
      });
    }

    it('without onStoreError, each failed request logs one console.error line with the driver’s message', async () => {
      const logged = vi.spyOn(console, 'error').mockImplementation(() => {});
      for (const [adapter, mode] of CALLS) {
        logged.mockClear();
        const key = randomUUID();
        const answer = await call(adapter, mode, { db: database(), key, runs: { count: 0 } });
        expect(answer.status).toBe(500);
        expect(logged).toHaveBeenCalledTimes(1);
        const [line] = logged.mock.calls[0] as [string];
        expect(line).not.toContain('\n');
        expect(line).toContain(key);
        expect(line).toContain(`${mode} mode`);
        expect(line).toContain('INVALID_CONFIGURATION');
        expect(line).toContain('run migrate(db) from @idem/server/postgres');
        expect(line).toContain('relation "idem_keys" does not exist [42P01]');
        expect(line).not.toMatch(/Failed query|insert into|select /i);
      }
    });

    it('enqueue throws a ConfigurationError naming migrate(db), with the driver’s error as its cause', async () => {
      const db = database();
      const error = await db
        .transaction((tx) => events.enqueue(tx, { topic: 'test.numbered', payload: { n: 1 } }))
        .catch((caught: unknown) => caught);
      expect(isConfigurationError(error)).toBe(true);
      expect((error as Error).message).toMatch(/^enqueue\(\) wrote nothing: .*`migrate\(db\)`/);
      expect(causeChain(error)).toContainEqual({
        message: 'relation "idem_outbox" does not exist',
        code: '42P01',
      });
    });

    it('a sweep (keys, inbox) says migrate(db) too', async () => {
      for (const sweep of [
        sweepExpired({ db: database() }),
        createInboxSweeper({
          consumers: [idempotentConsumer({ db: database(), name: 'billing' })],
        }).sweepNow(),
      ]) {
        const error = await sweep.catch((caught: unknown) => caught);
        expect(isConfigurationError(error)).toBe(true);
        expect((error as Error).message).toMatch(/^The sweep deleted nothing: .*`migrate\(db\)`/);
      }
    });

    it('a relay and a consumer say migrate(db) too: runOnce rejects, error events carry it, handle and handleBatch fail with it', async () => {
      const db = database();
      const relay = createRelay({ db, publisher: inProcessPublisher({}) });
      const relayError = await relay.runOnce().catch((caught: unknown) => caught);
      expect(isConfigurationError(relayError)).toBe(true);
      expect((relayError as Error).message).toContain('`migrate(db)`');

      const reported: unknown[] = [];
      const consumer = idempotentConsumer({
        db,
        name: 'billing',
        onEvent: (event) => {
          if (event.type === 'failed') reported.push(event.error);
        },
      });
      const handled = await consumer
        .handle({ id: randomUUID() }, async () => 'ran')
        .catch((caught: unknown) => caught);
      expect(isConfigurationError(handled)).toBe(true);
      expect((handled as Error).message).toMatch(/^idempotentConsumer "billing" handled nothing/);
      const [item] = await consumer.handleBatch([{ id: randomUUID() }], async () => {});
      expect(item?.status).toBe('failed');
      const batchError = item?.status === 'failed' ? item.error : undefined;
      expect(isConfigurationError(batchError)).toBe(true);
      expect(reported).toEqual([handled, batchError]);
      expect(causeChain(batchError)).toContainEqual({
        message: 'relation "idem_inbox" does not exist',
        code: '42P01',
      });
    });
  });
}

describe('a database that cannot be reached', () => {
  let db: PgDatabaseLike & { $client: postgres.Sql };
  beforeAll(async () => {
    // A port that was free a moment ago, and that nothing listens on now.
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    await new Promise<void>((resolve, reject) =>
      server.close((error) => (error ? reject(error) : resolve())),
    );
    db = drizzlePostgres(
      postgres(`postgres://postgres@127.0.0.1:${port}/test`, {
        max: 1,
        connect_timeout: 10,
        onnotice: () => {},
      }),
    );
  });
  afterAll(async () => {
    await db.$client.end({ timeout: 5 });
  });

  for (const [adapter, mode] of CALLS) {
    it(`${adapter}, ${mode} mode: 500 STORE_FAILED, told once to onStoreError with the socket's error`, async () => {
      const heard: Heard = [];
      const runs = { count: 0 };
      const key = randomUUID();
      const answer = await call(adapter, mode, { db, key, heard, runs });
      expect(answer).toMatchObject({ status: 500, code: 'STORE_FAILED' });
      expect(answer.message).toContain('The idempotency store failed');
      expect(answer.text).not.toMatch(SQL_OR_STACK);
      expect(runs.count).toBe(0);
      expect(heard).toHaveLength(1);
      const [{ error, report }] = heard as [Heard[number]];
      expect(report).toMatchObject({ code: 'STORE_FAILED', key, mode });
      expect(causeChain(error).map((cause) => cause.code)).toContain('ECONNREFUSED');
    });
  }
});
