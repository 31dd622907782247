import { sql } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { isConnectionError } from '../../src/postgres/connectionError.js';
import { MIGRATION_LOCK_ID, migrate } from '../../src/postgres/migrate.js';
import { untilGateWaiter } from '../harness.js';
import { type DriverName, drivers, escaped, useKillRig } from './killRig.js';

/** A promise as its settled value or error, so a rejection is looked at, not thrown. */
const settled = <T>(promise: Promise<T>) =>
  promise.then(
    (value) => ({ ok: true as const, value }),
    (error: unknown) => ({ ok: false as const, error }),
  );

describe.each(Object.keys(drivers) as DriverName[])(
  'migrate on %s when its backend dies',
  (driver) => {
    const rig = useKillRig();

    it('killed while it waits for the migration lock: it rejects with the connection error, the process keeps running, and the next run applies nothing', async () => {
      const client = drivers[driver](rig().url);
      const { observer } = rig();
      try {
        // The observer holds the lock migrate takes first, so its backend waits there.
        await observer.execute(sql`select pg_advisory_lock(${MIGRATION_LOCK_ID})`);
        const migrating = settled(migrate(client.db));
        const pid = await untilGateWaiter(observer, MIGRATION_LOCK_ID, 'the migration');
        await rig().kill(pid);
        await observer.execute(sql`select pg_advisory_unlock(${MIGRATION_LOCK_ID}::int8)`);
        const killed = await migrating;
        expect(killed.ok).toBe(false);
        expect(isConnectionError(killed.ok ? undefined : killed.error)).toBe(true);

        // The next run may meet the driver's stale error once (and run nothing), then works.
        let again = await settled(migrate(client.db));
        if (!again.ok) again = await settled(migrate(client.db));
        expect(again).toEqual({ ok: true, value: { applied: [] } });
        expect(escaped).toEqual([]);
      } finally {
        await client.close();
      }
    }, 120_000);
  },
);
