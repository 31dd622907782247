// `@idem/core/store`: for authors of stores (`IdempotencyStore` and the record's pure
// rules) and of adapters that build on the engine (their own claim, key headers, errors).
export { answerClaim, type ClaimAnswer, type UnclaimedClaim } from '../answerClaim.js';
export { type CanonicalJsonOptions, canonicalJson } from '../canonicalJson.js';
export { resolveErrorPolicy, storedErrorOf } from '../errorPolicy.js';
export { guardFor } from '../errors/IdempotencyError.js';
export { canonicalDecimal, exactJson } from '../exactJson.js';
export { fingerprint, fingerprintNow, sha256Hex, sha256HexNow } from '../fingerprint.js';
export { notifyObserver } from '../notifyObserver.js';
export { formatKeyHeader, type KeyHeaderFields, parseKeyHeader } from '../parseKeyHeader.js';
export { requirePositive } from '../requirePositive.js';
export { type CachedStoreOptions, cachedStore } from './cachedStore.js';
export { claimedNew } from './claimedNew.js';
export type {
  ClaimResult,
  IdempotencyStore,
  SweepOptions,
} from './IdempotencyStore.js';
export {
  type ClaimDecision,
  type ClaimRequest,
  decideClaim,
  type IdempotencyRecord,
  isExpired,
  isLeaseExpired,
  type LeaseToken,
  leaseTokenOf,
  type RecordStatus,
  type StoredOutcome,
} from './record.js';
