// `@idem/core/testing/contract`: the store conformance suite. An entry of its own because it
// is a vitest suite (it imports `vitest`), and `@idem/core/testing`'s runtime helpers must
// load where no test runner is installed.
export {
  type ServerClockSetup,
  type ServerClockSubject,
  serverClockContract,
} from './serverClockContract.js';
export {
  type StoreContractSetup,
  type StoreContractSubject,
  storeContract,
} from './storeContract.js';
export {
  CONTRACT_LEASE_MS,
  CONTRACT_TTL_MS,
  claimedToken,
  claimRequest,
} from './storeContractCase.js';
