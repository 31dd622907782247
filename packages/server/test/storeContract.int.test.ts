import { storeContract } from '@idem/core/testing/contract';
import { describe } from 'vitest';
import { createDrizzleStore, drizzleStore } from '../src/postgres/drizzleStore.js';
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

// A store picks each claim's first statement from what its recent claims found; every
// order must keep the contract on its own, whatever the traffic before it.
describe('Postgres, each claim starting with one statement', () => {
  const database = useDatabase('Postgres');
  for (const order of ['insert', 'read', 'claim'] as const) {
    storeContract(`drizzleStore, every claim starting with "${order}"`, async (clock) => {
      await database().truncate();
      return { store: createDrizzleStore(database().db, { clock }, false, order) };
    });
  }
});
