import { randomUUID } from 'node:crypto';
import { sql } from 'drizzle-orm';
import { beforeAll, describe, expect, it } from 'vitest';
import { idempotentHandler } from '../src/fetch/index.js';
import { backends, useDatabase } from './harness.js';

/**
 * A database that an older idem migrated has fewer columns than this version's statements
 * name: every call says to run migrate(db) again, as for a database never migrated, and
 * runs nothing.
 */
for (const backend of backends) {
  describe(`a database whose idem tables are older than this idem, on ${backend}`, () => {
    const database = useDatabase(backend);

    beforeAll(async () => {
      await database().db.execute(sql`alter table idem_keys drop column steps`);
    });

    for (const mode of ['lease', 'transaction'] as const) {
      it(`${mode} mode: 500 INVALID_CONFIGURATION naming migrate(db), the handler not run`, async () => {
        let runs = 0;
        const handle = idempotentHandler(
          { mode, db: database().db, scope: () => 'ann', onStoreError: () => undefined },
          async () => {
            runs++;
            return Response.json({ ok: true });
          },
        );
        const answer = await handle(
          new Request('http://shop.test/pay', {
            method: 'POST',
            headers: { 'content-type': 'application/json', 'idempotency-key': randomUUID() },
            body: '{"cents":100}',
          }),
        );
        expect(answer.status).toBe(500);
        const problem = (await answer.json()) as { code: string; detail: string };
        expect(problem.code).toBe('INVALID_CONFIGURATION');
        expect(problem.detail).toMatch(
          /idem's tables in this database are older than this version of idem .*`migrate\(db\)`/,
        );
        expect(problem.detail).not.toMatch(/steps|idem_keys|insert into/i);
        expect(runs).toBe(0);
      });
    }
  });
}
