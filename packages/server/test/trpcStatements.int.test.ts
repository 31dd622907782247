import { randomUUID } from 'node:crypto';
import type { Logger } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idempotencyContext } from '../src/trpc/index.js';
import { createTestApp, type TestApp } from './fixtures/testApp.js';
import {
  driverBackends,
  loggedDatabase,
  loggedTransaction,
  statementText,
  useDatabase,
} from './harness.js';

/** A short name for each statement idem (or the test procedure) sends. */
function label(query: string): string {
  const text = statementText(query);
  const rules: [RegExp, string][] = [
    [/^with previous as materialized/, 'bound lock wait'],
    [
      /^select set_config\('lock_timeout', current_setting\('idem.lock_timeout'\)/,
      'restore lock_timeout',
    ],
    [/^with "?inserted"? as \(insert into "idem_keys"/, 'claim'],
    [/^insert into "idem_keys" .* on conflict .* do update/, 'store completed'],
    [/^insert into "idem_keys"/, 'claim new key'],
    [/^update "idem_keys" set "fingerprint"/, 'take over'],
    [/^select .* from "idem_keys"/, 'read record'],
    [/^update "idem_keys" set "status"/, 'complete'],
    [/^select pg_advisory_lock\(/, 'hold key lock'],
    [/^select pg_advisory_unlock\(/, 'release key lock'],
    [/^rollback and chain$/, 'rollback and chain'],
    [/^begin$/, 'begin'],
    [/^commit$/, 'commit'],
    [/^insert into orders/, 'procedure: insert order'],
    [/^select current_setting\('lock_timeout'\)/, 'procedure: read lock_timeout'],
  ];
  return rules.find(([pattern]) => pattern.test(text))?.[1] ?? text;
}

/**
 * The statements each kind of request sends, in the order they are dispatched. This is
 * idem's cost budget made executable (lease mode: a claim before and a completion after;
 * transaction mode: claim and completion inside the procedure's transaction; a replay: one
 * read, after a new key's INSERT where most keys are new).
 */
for (const backend of driverBackends) {
  const inTransaction = (statements: string[]) => loggedTransaction(backend, statements);

  describe(`statements per request on ${backend}`, () => {
    const database = useDatabase(backend);
    const statements: string[] = [];
    const logger: Logger = { logQuery: (query) => statements.push(label(query)) };
    let app: TestApp;
    let close = async () => {};

    beforeAll(async () => {
      const logged = loggedDatabase(database(), logger);
      close = logged.close;
      await logged.db.execute(
        'create table if not exists orders (id serial primary key, principal text not null, tag text not null, sku text not null)',
      );
      app = createTestApp(logged.db);
    });
    afterAll(() => close());

    const call = async (
      run: (caller: ReturnType<TestApp['createCaller']>) => Promise<unknown>,
      key: string,
    ) => {
      statements.length = 0;
      await run(app.createCaller({ ...idempotencyContext({ key }), user: 'alice' })).catch(
        () => undefined,
      );
      return [...statements];
    };

    it('lease mode: one claim before, one fenced completion after; a replay or mismatch: a read, after the INSERT where most keys are new', async () => {
      const input = { tag: randomUUID() };
      const callNew = () => call((caller) => caller.echo(input), randomUUID());
      // Most requests' keys are new: each claim starts with the new key's INSERT.
      for (let index = 0; index < 24; index++) await callNew();
      const key = randomUUID();
      expect(await call((caller) => caller.echo(input), key)).toEqual([
        'claim new key',
        'complete',
      ]);
      // A retry among them: the INSERT finds the key, and a read answers it.
      expect(await call((caller) => caller.echo(input), key)).toEqual([
        'claim new key',
        'read record',
      ]);
      expect(await call((caller) => caller.echo({ ...input, payload: 1 }), key)).toEqual([
        'claim new key',
        'read record',
      ]);

      // A burst of retries (after an outage): a replay is one read.
      for (let index = 0; index < 24; index++) await call((caller) => caller.echo(input), key);
      expect(await call((caller) => caller.echo(input), key)).toEqual(['read record']);
      // A new key in the burst: the read finds nothing, the full claim inserts it.
      expect(await callNew()).toEqual(['read record', 'claim', 'complete']);

      // A mix of both: the full claim, which inserts a new key or reads an existing one.
      for (let index = 0; index < 24; index++) {
        await callNew();
        await call((caller) => caller.echo(input), key);
      }
      expect(await callNew()).toEqual(['claim', 'complete']);
      expect(await call((caller) => caller.echo(input), key)).toEqual(['claim']);
    });

    it('transaction mode: claim and completion inside the transaction, pipelined with their neighbours', async () => {
      const key = randomUUID();
      const input = { tag: randomUUID(), sku: 'book' };
      // Before the transaction, one read: a completed key is answered from it.
      expect(await call((caller) => caller.txOrder(input), key)).toEqual([
        'read record',
        ...inTransaction([
          'claim new key', // takes the key lock (a held one: bounding its own wait, then putting lock_timeout back)
          'procedure: insert order',
          'procedure: read lock_timeout',
          'complete',
        ]),
      ]);
      // A replay is one read and never runs the procedure.
      expect(await call((caller) => caller.txOrder(input), key)).toEqual(['read record']);
      const declined = { tag: randomUUID(), sku: 'book', outcome: 'declined' as const };
      expect(await call((caller) => caller.txOrder(declined), randomUUID())).toEqual([
        'read record',
        ...inTransaction([
          'claim new key',
          'procedure: insert order',
          'procedure: read lock_timeout',
          // A stored refusal: the writes roll back while the key lock holds duplicates off.
          'hold key lock',
          'rollback and chain',
          'store completed',
          'release key lock',
        ]),
      ]);
    });
  });
}
