export { type MemoryStore, type MemoryStoreOptions, memoryStore } from './memoryStore.js';
export {
  type StoreContractSetup,
  type StoreContractSubject,
  storeContract,
} from './storeContract.js';
