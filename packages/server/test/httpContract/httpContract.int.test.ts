import { describe } from 'vitest';
import { type BackendName, driverBackends } from '../harness.js';
import { useFetchTarget } from './fetchTarget.js';
import { httpContract } from './httpContract.js';
import { useTrpcTarget } from './trpcTarget.js';

/** One contract, every endpoint style, every driver. */
const targets = [
  { name: 'the tRPC middleware', use: useTrpcTarget },
  { name: 'idempotentHandler (Fetch API)', use: useFetchTarget },
  {
    name: 'idempotentHandler (Fetch API) in transaction mode',
    use: (backend: BackendName) => useFetchTarget(backend, 'transaction'),
  },
];

for (const backend of driverBackends) {
  for (const { name, use } of targets) {
    describe(`HTTP contract: ${name} on ${backend}`, () => {
      httpContract(use(backend));
    });
  }
}
