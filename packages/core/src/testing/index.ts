// `@idem/core/testing`: an in-memory store, and time and randomness that tests control. It
// imports nothing from a test runner, so examples and tools can use it in a plain install;
// the store conformance suite, a vitest suite, is `@idem/core/testing/contract`.
export { seededRandom } from '../retry/Random.js';
export { type ManualClock, manualClock } from './manualClock.js';
export { type MemoryStore, type MemoryStoreOptions, memoryStore } from './memoryStore.js';
