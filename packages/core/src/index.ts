export { answerClaim, type ReplayedOutcome, type UnclaimedClaim } from './answerClaim.js';
export { type Clock, systemClock, type TimerHandle } from './Clock.js';
export { type CachedStoreOptions, cachedStore } from './cachedStore.js';
export { canonicalJson } from './canonicalJson.js';
export {
  createIdempotency,
  type ExecuteRequest,
  type ExecuteResult,
  type HandlerContext,
  type Idempotency,
  type IdempotencyEvent,
  type IdempotencyEventType,
  type IdempotencyOptions,
  type IdempotencySettings,
  type InProgressWait,
  wasReplayed,
} from './createIdempotency.js';
export { deriveKey } from './deriveKey.js';
export {
  defaultErrorPolicy,
  type ErrorDecision,
  type ErrorPolicy,
  type ErrorPolicyOption,
  ReplayedError,
  resolveErrorPolicy,
  storedErrorOf,
} from './errorPolicy.js';
export * from './errors/index.js';
export { fingerprint, fingerprintNow, sha256Hex, sha256HexNow } from './fingerprint.js';
export type {
  ClaimRequest,
  ClaimResult,
  IdempotencyStore,
  SweepOptions,
} from './IdempotencyStore.js';
export { type ManualClock, manualClock } from './manualClock.js';
export { notifyObserver } from './notifyObserver.js';
export { formatKeyHeader, parseKeyHeader } from './parseKeyHeader.js';
export {
  type ClaimDecision,
  type ClaimInput,
  decideClaim,
  type IdempotencyRecord,
  isExpired,
  isLeaseExpired,
  type JsonValue,
  type LeaseToken,
  leaseTokenOf,
  type RecordStatus,
  type StoredError,
  type StoredOutcome,
} from './record.js';
export { requirePositive } from './requirePositive.js';
export { type BackoffOptions, backoffDelay } from './retry/backoff.js';
export { type Random, seededRandom } from './retry/Random.js';
export { RetryBudget, type RetryBudgetOptions, type RetryKind } from './retry/RetryBudget.js';
export { parseRetryAfter, retryAfterSeconds } from './retry/retryAfter.js';
export { type Serializer, taggedJsonSerializer } from './serializer.js';
export { type MemoryStore, type MemoryStoreOptions, memoryStore } from './testing/memoryStore.js';
export { MAX_KEY_LENGTH, validateKey } from './validateKey.js';
export {
  IDEMPOTENCY_KEY_BATCH_HEADER,
  IDEMPOTENCY_KEY_HEADER,
  IDEMPOTENCY_STATUS_BATCH_HEADER,
  IDEMPOTENCY_STATUS_HEADER,
  IDEMPOTENT_REPLAYED_BATCH_HEADER,
  IDEMPOTENT_REPLAYED_HEADER,
  type IdempotencyStatus,
  RETRY_AFTER_HEADER,
} from './wireFormat.js';
