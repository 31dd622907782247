import { type SQL, sql } from 'drizzle-orm';
import { afterAll, afterEach, beforeAll, expect } from 'vitest';
import { migrate } from '../../src/postgres/migrate.js';
import type { PgDatabaseLike } from '../../src/postgres/PgDatabaseLike.js';
import { until } from '../fixtures/deferred.js';
import {
  connect,
  connectNodePostgres,
  countOf,
  createScratchDatabase,
  rows,
  type ScratchDatabase,
  untilGateWaiter,
} from '../harness.js';

/**
 * The statements a request can be killed at, each behind an advisory lock of its own (a
 * "gate") that the rig's observer holds while it kills the backend waiting there; every
 * gate is a shared lock for the requests, so one not held lets them all through.
 */
export const GATES = {
  /** A new key's `INSERT` (in progress): the claim. */
  claim: 727_301,
  /** The handler's own `INSERT INTO loss_orders`. */
  handler: 727_302,
  /** The `UPDATE` that completes a key. */
  completion: 727_303,
  /** The `COMMIT` of a transaction that wrote an order (a deferred trigger's wait). */
  commit: 727_304,
  /** A completed key's `INSERT`: the upsert that stores a refusal after the rollback. */
  store: 727_305,
  /** `pg_advisory_unlock(int4, int4)`: the key's session lock let go after that upsert. */
  unlock: 727_306,
  /** The inbox rows' `INSERT`. */
  inbox: 727_307,
} as const;

export type Statement = keyof typeof GATES;

/** The clients a test's requests run on: one connection, so the next request reopens it. */
export const drivers = {
  'postgres-js': (url: string) => {
    const db = connect(url, 1);
    return { db: db as PgDatabaseLike, close: () => db.$client.end({ timeout: 5 }) };
  },
  'node-postgres': (url: string) => {
    const db = connectNodePostgres(url, 1);
    return { db: db as PgDatabaseLike, close: () => db.$client.end() };
  },
} as const;

export type DriverName = keyof typeof drivers;

/** A gate as SQL text: a literal, which a trigger's arguments must be. */
const gate = (statement: Statement) => sql.raw(String(GATES[statement]));

/** The tables and gates of the rig, on a migrated database. */
const SETUP: SQL[] = [
  sql`create table loss_orders (id serial primary key, tag text not null)`,
  sql`create function loss_gate(gate int8) returns void language sql
      as $$ select pg_advisory_xact_lock_shared(gate) $$`,
  sql`create function loss_key_gate() returns trigger language plpgsql as $$
      begin
        if tg_op = 'UPDATE' then perform loss_gate(${gate('completion')});
        elsif new.status = 'in_progress' then perform loss_gate(${gate('claim')});
        else perform loss_gate(${gate('store')});
        end if;
        return new;
      end $$`,
  sql`create trigger loss_key_insert before insert on idem_keys
      for each row execute function loss_key_gate()`,
  sql`create trigger loss_key_complete before update on idem_keys for each row
      when (old.status = 'in_progress' and new.status = 'completed')
      execute function loss_key_gate()`,
  sql`create function loss_order_gate() returns trigger language plpgsql as $$
      begin perform loss_gate(tg_argv[0]::int8); return new; end $$`,
  sql`create trigger loss_order_insert before insert on loss_orders
      for each row execute function loss_order_gate(${gate('handler')})`,
  sql`create constraint trigger loss_order_commit after insert on loss_orders
      deferrable initially deferred
      for each row execute function loss_order_gate(${gate('commit')})`,
  sql`create trigger loss_inbox_insert before insert on idem_inbox
      for each row execute function loss_order_gate(${gate('inbox')})`,
  // Found before pg_catalog's own by the search path the database sets below.
  sql`create function public.pg_advisory_unlock(int4, int4) returns boolean language plpgsql
      as $$ begin perform loss_gate(${gate('unlock')});
        return pg_catalog.pg_advisory_unlock($1, $2); end $$`,
];

/**
 * Errors that reached the process's last-resort handlers, where a server with Node's
 * default handlers would have exited. vitest reports such an error only while its own
 * listener is the only one: with these installed, the tests assert that none came.
 */
export const escaped: string[] = [];
const onUncaught = (error: unknown) =>
  escaped.push(`uncaughtException: ${(error as Error)?.stack ?? String(error)}`);
const onUnhandled = (error: unknown) =>
  escaped.push(`unhandledRejection: ${(error as Error)?.stack ?? String(error)}`);

/** What the rig gives a test file, once its `beforeAll` ran. */
export interface KillRig {
  url: string;
  /** The test's own connection: it holds gates, kills backends and reads rows. */
  observer: ReturnType<typeof connect>;
  /**
   * Holds the gate of `statement`, starts `request`, kills the backend that waits there,
   * lets the gate go and answers what the request came to.
   */
  killAt<T>(statement: Statement, request: () => Promise<T>): Promise<T>;
  /** Kills the backend `pid` (one the test found itself), and checks that it was killed. */
  kill(pid: number): Promise<void>;
  /**
   * Kills the backend `pid` of a transaction idle under a handler, and waits until the
   * `driver` knows. postgres.js gives the transaction up when the socket closes, so the
   * call's `answer` settles while the handler still waits: that is waited for (the backend
   * being gone is not enough: the client may not have read the close yet). node-postgres
   * waits for the handler: there the backend being gone is all there is to wait for.
   */
  killIdle(pid: number, answer: Promise<unknown>, driver: DriverName): Promise<void>;
  /** Orders written under `tag`. */
  ordersOf(tag: string): Promise<number>;
  /** The key's record: its status and what it stored, if it is there. */
  recordOf(key: string): Promise<{ status: string; kind: string | null } | undefined>;
  /** Waits until no key of the rig's database is in progress with a live lease. */
  untilNoKeyHeld(key: string): Promise<void>;
}

/**
 * A scratch database with the gates above, an observer connection, and the last-resort
 * listeners: what every connection-loss test file starts from. Each test's escaped errors
 * are checked by the test; the rig checks again after the last test, as a transaction left
 * pending could still write then.
 */
export function useKillRig(): () => KillRig {
  let scratch: ScratchDatabase | undefined;
  let rig: KillRig | undefined;

  beforeAll(async () => {
    process.on('uncaughtException', onUncaught);
    process.on('unhandledRejection', onUnhandled);
    scratch = await createScratchDatabase();
    const observer = connect(scratch.url, 1);
    await migrate(observer);
    for (const statement of SETUP) await observer.execute(statement);
    const name = new URL(scratch.url).pathname.slice(1);
    await observer.execute(
      sql`alter database ${sql.identifier(name)} set search_path = public, pg_catalog`,
    );
    rig = rigOn(scratch.url, observer);
  });

  afterEach(() => {
    escaped.length = 0;
  });

  afterAll(async () => {
    try {
      await rig?.observer.$client.end({ timeout: 5 });
      await scratch?.drop();
      expect(escaped).toEqual([]);
    } finally {
      process.off('uncaughtException', onUncaught);
      process.off('unhandledRejection', onUnhandled);
    }
  });

  return () => {
    if (!rig) throw new Error('the kill rig is not set up (used outside a test?)');
    return rig;
  };
}

function rigOn(url: string, observer: ReturnType<typeof connect>): KillRig {
  const kill = async (pid: number) => {
    const [killed] = await rows<{ ok: boolean }>(
      observer,
      sql`select pg_terminate_backend(${pid}) as ok`,
    );
    expect(killed?.ok).toBe(true);
  };
  return {
    url,
    observer,
    kill,
    async killIdle(pid, answer, driver) {
      await kill(pid);
      let settled = false;
      void answer.then(() => {
        settled = true;
      });
      const gone = async () =>
        (await countOf(
          observer,
          sql`select count(*)::int as n from pg_stat_activity where pid = ${pid}`,
        )) === 0;
      await until(async () => (driver === 'postgres-js' ? settled : gone()), {
        what: `the ${driver} client to know that backend ${pid} is gone`,
        timeoutMs: 60_000,
      });
    },
    async killAt<T>(statement: Statement, request: () => Promise<T>): Promise<T> {
      const held = GATES[statement];
      await observer.execute(sql`select pg_advisory_lock(${held}::int8)`);
      let answer: Promise<T> | undefined;
      try {
        answer = request();
        // The kill must not wait for the answer; the answer is awaited below.
        answer.catch(() => undefined);
        await kill(await untilGateWaiter(observer, held, `a request to wait at its ${statement}`));
      } finally {
        // Let go before the answer: the request may retry the statement on another
        // connection, which must pass the gate.
        await observer.execute(sql`select pg_advisory_unlock(${held}::int8)`);
      }
      const answered = await answer;
      // The observer's own round trip: by its reply, a write the driver put off until the
      // next turn of the event loop has been attempted, so a crash is in `escaped`.
      await observer.execute(sql`select 1`);
      return answered;
    },
    ordersOf: (tag) =>
      countOf(observer, sql`select count(*)::int as n from loss_orders where tag = ${tag}`),
    async recordOf(key) {
      const [record] = await rows<{ status: string; kind: string | null }>(
        observer,
        sql`select status, outcome->>'kind' as kind from idem_keys where key = ${key}`,
      );
      return record;
    },
    untilNoKeyHeld: async (key) => {
      await until(
        async () =>
          (await countOf(
            observer,
            sql`select count(*)::int as n from idem_keys where key = ${key}
                and status = 'in_progress' and locked_until > statement_timestamp()`,
          )) === 0,
        { what: `the lease on ${key} to run out`, timeoutMs: 60_000 },
      );
    },
  };
}
