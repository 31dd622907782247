import { storeContract } from '@idem/core/testing/contract';
import { describe } from 'vitest';
import { drizzleStore } from '../src/postgres/drizzleStore.js';
import { driverBackends, useDatabase } from './harness.js';

for (const backend of driverBackends) {
  describe(backend, () => {
    const database = useDatabase(backend);
    storeContract(`drizzleStore on ${backend}`, async (clock) => {
      await database().truncate();
      return { store: drizzleStore(database().db, { clock }) };
    });
  });
}
