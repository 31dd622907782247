import { randomUUID } from 'node:crypto';
import { type AddressInfo, createServer, type Server, Socket } from 'node:net';
import { isLeaseLostError } from '@idem/core';
import { sql } from 'drizzle-orm';
import { drizzle as drizzleNodePostgres } from 'drizzle-orm/node-postgres';
import { drizzle as drizzlePostgres } from 'drizzle-orm/postgres-js';
import pg from 'pg';
import postgres from 'postgres';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { idempotentHandler } from '../src/fetch/index.js';
import { drizzleStore } from '../src/postgres/drizzleStore.js';
import { migrate } from '../src/postgres/migrate.js';
import type { PgDatabaseLike } from '../src/postgres/PgDatabaseLike.js';
import { until } from './fixtures/deferred.js';
import { escapedErrors } from './fixtures/escapedErrors.js';
import {
  connect,
  countOf,
  createScratchDatabase,
  oneRow,
  rows,
  type ScratchDatabase,
  untilGateWaiter,
} from './harness.js';

/**
 * An advisory lock the test holds so that an `UPDATE` of `idem_keys` sent by a gated client
 * (one whose `application_name` is {@link GATED}) waits for it, before it touches a row:
 * a statement-level trigger takes it. The backend waiting there can then be killed, between
 * the handler's write and the completion, and a retry of that update waits there too.
 */
const GATE = 727_313;
const GATED = 'idem_gated';

/** Errors that reached the process's last-resort handlers: none may (see the afterAll). */
const { escaped, watch, unwatch } = escapedErrors();

/** The clients the holder may use: each driver's pool, and postgres-js on one connection. */
const holders = [
  { name: 'postgres-js, one connection (the retry waits for the reconnect)', max: 1 },
  { name: 'postgres-js, a pool (the retry takes another connection)', max: 4 },
  { name: 'node-postgres, a Pool', max: 4, nodePostgres: true },
] as const;

function openHolder(url: string, holder: (typeof holders)[number]) {
  if ('nodePostgres' in holder) {
    const pool = new pg.Pool({ connectionString: url, max: holder.max, application_name: GATED });
    // A pooled client whose connection was killed while idle reports it here.
    pool.on('error', () => {});
    return { db: drizzleNodePostgres(pool) as PgDatabaseLike, close: () => pool.end() };
  }
  const client = postgres(url, {
    max: holder.max,
    onnotice: () => {},
    connection: { application_name: GATED },
  });
  return { db: drizzlePostgres(client) as PgDatabaseLike, close: () => client.end({ timeout: 5 }) };
}

/**
 * A TCP proxy in front of the test database whose `cutAtNextReply()` makes it close the
 * client's connection, unforwarded, at the next bytes the server sends: a statement that
 * commits and whose reply is lost on the way.
 */
async function replyCuttingProxy(url: string) {
  const target = new URL(url);
  const sockets = new Set<Socket>();
  let cut = false;
  const server: Server = createServer((client) => {
    const upstream = new Socket();
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('error', () => {});
      socket.on('close', () => sockets.delete(socket));
    }
    upstream.connect(Number(target.port || 5432), target.hostname);
    client.on('data', (chunk) => upstream.write(chunk));
    upstream.on('data', (chunk) => {
      if (cut) {
        cut = false;
        client.destroy();
        upstream.destroy();
      } else client.write(chunk);
    });
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const proxied = new URL(url);
  proxied.hostname = '127.0.0.1';
  proxied.port = String((server.address() as AddressInfo).port);
  return {
    url: proxied.toString(),
    cutAtNextReply: () => {
      cut = true;
    },
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

describe('a completion whose connection is killed after the handler wrote', () => {
  let scratch: ScratchDatabase;
  /** The test's own connection: holds the gate, kills backends, reads rows. */
  let observer: ReturnType<typeof connect>;

  beforeAll(async () => {
    watch();
    scratch = await createScratchDatabase();
    observer = connect(scratch.url, 1);
    await migrate(observer);
    await observer.execute(
      sql`create table confirmations (id serial primary key, event text not null)`,
    );
    await observer.execute(sql`
      create function idem_test_gate() returns trigger language plpgsql as $$
      begin
        if current_setting('application_name') = ${sql.raw(`'${GATED}'`)} then
          perform pg_advisory_xact_lock(${sql.raw(String(GATE))});
        end if;
        return null;
      end $$`);
    await observer.execute(sql`
      create trigger idem_test_gate before update on idem_keys
      for each statement execute function idem_test_gate()`);
  });

  afterAll(async () => {
    try {
      await observer?.$client.end({ timeout: 5 });
      await scratch?.drop();
      expect(escaped).toEqual([]);
    } finally {
      unwatch();
    }
  });

  afterEach(async () => {
    // A test that failed half-way must not leave the gate shut for the next.
    await observer.execute(sql`select pg_advisory_unlock_all()`);
  });

  const holdGate = () => observer.execute(sql`select pg_advisory_lock(${GATE}::int8)`);
  const openGate = () => observer.execute(sql`select pg_advisory_unlock(${GATE}::int8)`);
  const waiterAtGate = (what: string) => untilGateWaiter(observer, GATE, what);
  /**
   * Claims a new key in `store` with a lease of `leaseMs`, shuts the gate and starts the
   * completion with `value`, which waits at the gate: the claim and that completion.
   */
  async function completionAtGate(
    store: ReturnType<typeof drizzleStore>,
    leaseMs: number,
    value: string,
  ) {
    const request = {
      scope: 'provider:test',
      key: randomUUID(),
      fingerprint: 'f',
      leaseMs,
      ttlMs: 120_000,
    };
    const claimed = await store.claim(request);
    expect(claimed.status).toBe('claimed');
    if (claimed.status !== 'claimed') throw new Error('the key was not claimed');
    await holdGate();
    const completion = store.complete(claimed.record, { kind: 'success', value }, 120_000);
    completion.catch(() => undefined);
    return { request, completion };
  }
  async function kill(pid: number) {
    const killed = await oneRow<{ ok: boolean }>(
      observer,
      sql`select pg_terminate_backend(${pid}) as ok`,
    );
    expect(killed.ok).toBe(true);
  }

  /**
   * Shuts the gate, starts `request`, kills the backend of the first update of `idem_keys`
   * it sends (the completion, once the handler has written; or a heartbeat), opens the gate
   * and returns the answer.
   */
  async function killedAtFencedUpdate<T>(request: () => Promise<T>): Promise<T> {
    await holdGate();
    try {
      const answer = request();
      answer.catch(() => undefined);
      await kill(await waiterAtGate('the completion to wait at the gate'));
      await openGate();
      return await answer;
    } finally {
      await observer.execute(sql`select pg_advisory_unlock_all()`);
    }
  }

  const confirmationsOf = (event: string) =>
    countOf(observer, sql`select count(*)::int as n from confirmations where event = ${event}`);
  const recordOf = async (key: string) =>
    (
      await rows<{ status: string; version: number; kind: string | null }>(
        observer,
        sql`select status, version, outcome->>'kind' as kind from idem_keys where key = ${key}`,
      )
    )[0];

  const delivery = (event: string, refuse = false) =>
    new Request('http://shop.test/webhooks/payments', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ id: event, refuse }),
    });

  /** A webhook receiver that confirms a payment, through `db` (lease) or `tx` (transaction). */
  function receiver(db: PgDatabaseLike, mode: 'lease' | 'transaction') {
    const key = ({ json }: { json: unknown }) => (json as { id: string }).id;
    const scope = () => 'provider:test';
    const confirm = async (writer: PgDatabaseLike, request: Request) => {
      const event = (await request.json()) as { id: string; refuse: boolean };
      await writer.execute(sql`insert into confirmations (event) values (${event.id})`);
      if (event.refuse) {
        throw Object.assign(new Error('the amount does not match'), { status: 402 });
      }
      return Response.json({ received: event.id });
    };
    return mode === 'lease'
      ? idempotentHandler({ store: drizzleStore(db), scope, key }, (request) =>
          confirm(db, request),
        )
      : idempotentHandler({ mode, db, scope, key }, (request, { tx }) => confirm(tx, request));
  }

  describe.each(holders)('lease mode on $name', (holder) => {
    let db: PgDatabaseLike;
    let close: () => Promise<void>;

    beforeAll(() => {
      ({ db, close } = openHolder(scratch.url, holder));
    });

    afterAll(async () => {
      await close?.();
    });

    it.each([
      { what: 'an answer', refuse: false, status: 200, kind: 'success' },
      { what: 'a stored refusal', refuse: true, status: 402, kind: 'success' },
    ])(
      '$what is stored by a retry on another connection: one confirmation, and the redelivery replays it',
      async ({ refuse, status, kind }) => {
        const receive = receiver(db, 'lease');
        const event = `evt_${randomUUID()}`;

        const first = await killedAtFencedUpdate(() => receive(delivery(event, refuse)));
        expect(first.status).toBe(status);
        expect(first.headers.get('idempotent-replayed')).toBeNull();
        const body = await first.text();
        expect(await recordOf(event)).toEqual({ status: 'completed', version: 1, kind });
        expect(await confirmationsOf(event)).toBe(1);

        const redelivered = await receive(delivery(event, refuse));
        expect(redelivered.status).toBe(status);
        expect(redelivered.headers.get('idempotent-replayed')).toBe('true');
        expect(await redelivered.text()).toBe(body);
        expect(await confirmationsOf(event)).toBe(1);
        expect(escaped).toEqual([]);
      },
    );

    it('a heartbeat is retried on another connection and extends the lease', async () => {
      const store = drizzleStore(db);
      const key = randomUUID();
      const claimed = await store.claim({
        scope: 'provider:test',
        key,
        fingerprint: 'f',
        leaseMs: 60_000,
        ttlMs: 120_000,
      });
      expect(claimed.status).toBe('claimed');
      const lockedUntilMs = async () =>
        (
          await oneRow<{ ms: number }>(
            observer,
            sql`select (extract(epoch from locked_until) * 1000)::float8 as ms from idem_keys where key = ${key}`,
          )
        ).ms;
      const before = await lockedUntilMs();
      await killedAtFencedUpdate(() => store.heartbeat(claimed.record, 60_000));
      expect(await lockedUntilMs()).toBeGreaterThan(before);
      await store.complete(claimed.record, { kind: 'success', value: 1 }, 120_000);
      expect(await recordOf(key)).toEqual({ status: 'completed', version: 1, kind: 'success' });
    });
  });

  it('a retried completion that arrives after a takeover changes nothing: the takeover keeps the key', async () => {
    const holder = openHolder(scratch.url, holders[1]);
    try {
      const store = drizzleStore(holder.db);
      const other = drizzleStore(observer);
      const { request, completion } = await completionAtGate(store, 3_000, 'zombie');
      const first = await waiterAtGate('the completion to wait at the gate');
      await kill(first);
      // The retry, on another connection, waits at the gate too: the lease runs out meanwhile.
      const retry = await until(
        async () => {
          const pid = await waiterAtGate('the retried completion to wait at the gate');
          return pid === first ? undefined : pid;
        },
        { what: 'the retried completion', timeoutMs: 60_000 },
      );
      expect(retry).not.toBe(first);
      const takeover = await until(
        async () => {
          const claim = await other.claim(request);
          return claim.status === 'claimed' ? claim.record : undefined;
        },
        { what: 'the lease to lapse and another attempt to take the key over', timeoutMs: 60_000 },
      );
      expect(takeover.version).toBe(2);
      await openGate();
      const failure = await completion.then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(isLeaseLostError(failure)).toBe(true);
      expect(await recordOf(request.key)).toEqual({
        status: 'in_progress',
        version: 2,
        kind: null,
      });
      await other.complete(takeover, { kind: 'success', value: 'taken over' }, 120_000);
      const stored = await oneRow<{ value: string }>(
        observer,
        sql`select outcome->>'value' as value from idem_keys where key = ${request.key}`,
      );
      expect(stored.value).toBe('taken over');
    } finally {
      await holder.close();
    }
  });

  it('a completion that committed but whose reply was lost is not retried into LEASE_LOST: the retry finds it stored', async () => {
    const proxy = await replyCuttingProxy(scratch.url);
    const holder = openHolder(proxy.url, holders[0]);
    try {
      const store = drizzleStore(holder.db);
      const { request, completion } = await completionAtGate(store, 60_000, 'paid');
      await waiterAtGate('the completion to wait at the gate');
      // Its reply is the next thing the server sends on that connection, once it committed.
      proxy.cutAtNextReply();
      await openGate();
      await completion;
      const stored = await oneRow<{ status: string; version: number; value: string }>(
        observer,
        sql`select status, version, outcome->>'value' as value from idem_keys where key = ${request.key}`,
      );
      expect(stored).toEqual({ status: 'completed', version: 1, value: 'paid' });
      expect(escaped).toEqual([]);
    } finally {
      await holder.close();
      await proxy.close();
    }
  });

  it('completions gathered into one statement whose reply was lost: each retry finds its own stored', async () => {
    const proxy = await replyCuttingProxy(scratch.url);
    const holder = openHolder(proxy.url, holders[0]);
    try {
      const store = drizzleStore(holder.db);
      const calls = ['paid', 'shipped'].map((value) => ({
        value,
        request: {
          scope: 'provider:test',
          key: randomUUID(),
          fingerprint: 'f',
          leaseMs: 60_000,
          ttlMs: 120_000,
        },
      }));
      const claims = await Promise.all(calls.map(({ request }) => store.claim(request)));
      await holdGate();
      // Asked for in one turn: one statement completes both keys.
      const completions = claims.map((claimed, index) => {
        if (claimed.status !== 'claimed') throw new Error('the key was not claimed');
        const { value } = calls[index] as (typeof calls)[number];
        return store.complete(claimed.record, { kind: 'success', value }, 120_000);
      });
      for (const completion of completions) completion.catch(() => undefined);
      const pid = await waiterAtGate('the gathered completion to wait at the gate');
      const waiting = await oneRow<{ query: string }>(
        observer,
        sql`select query from pg_stat_activity where pid = ${pid}`,
      );
      expect(waiting.query).toContain('unnest(');
      // Its reply is the next thing the server sends on that connection, once it committed.
      proxy.cutAtNextReply();
      await openGate();
      await Promise.all(completions);
      for (const { value, request } of calls) {
        const stored = await oneRow<{ status: string; version: number; value: string }>(
          observer,
          sql`select status, version, outcome->>'value' as value from idem_keys where key = ${request.key}`,
        );
        expect(stored).toEqual({ status: 'completed', version: 1, value });
      }
      expect(escaped).toEqual([]);
    } finally {
      await holder.close();
      await proxy.close();
    }
  });

  it('transaction mode: the write and the completion die together, and the redelivery runs once and stores its answer', async () => {
    const holder = openHolder(scratch.url, holders[1]);
    try {
      const receive = receiver(holder.db, 'transaction');
      const event = `evt_${randomUUID()}`;

      const first = await killedAtFencedUpdate(() => receive(delivery(event)));
      expect(first.status).toBe(500);
      expect(await recordOf(event)).toBeUndefined();
      expect(await confirmationsOf(event)).toBe(0);

      // The provider sends the same bytes again until it gets an answer that is not a 5xx
      // (postgres.js may hand the killed backend's error to the next statement on its pool).
      const redelivered = await until(
        async () => {
          const answer = await receive(delivery(event));
          return answer.status < 500 ? answer : undefined;
        },
        { what: 'a redelivery to be answered', timeoutMs: 60_000 },
      );
      expect(redelivered.status).toBe(200);
      expect(redelivered.headers.get('idempotent-replayed')).toBeNull();
      expect(await confirmationsOf(event)).toBe(1);
      expect(await recordOf(event)).toEqual({ status: 'completed', version: 1, kind: 'success' });

      const again = await receive(delivery(event));
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(await again.text()).toBe(await redelivered.text());
      expect(await confirmationsOf(event)).toBe(1);
      expect(escaped).toEqual([]);
    } finally {
      await holder.close();
    }
  });
});
