// `@idem/core/testing`: an in-memory store, the store conformance suite, and time and
// randomness that tests control.
export { seededRandom } from '../retry/Random.js';
export { type ManualClock, manualClock } from './manualClock.js';
export { type MemoryStore, type MemoryStoreOptions, memoryStore } from './memoryStore.js';
export {
  type StoreContractSetup,
  type StoreContractSubject,
  storeContract,
} from './storeContract.js';
