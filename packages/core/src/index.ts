export { type Clock, systemClock, type TimerHandle } from './Clock.js';
export * from './errors/index.js';
export type {
  ClaimRequest,
  ClaimResult,
  IdempotencyStore,
  SweepOptions,
} from './IdempotencyStore.js';
export { type ManualClock, manualClock } from './manualClock.js';
export {
  type ClaimDecision,
  type ClaimInput,
  decideClaim,
  type IdempotencyRecord,
  isExpired,
  isLeaseExpired,
  type JsonValue,
  type LeaseToken,
  type RecordStatus,
  type StoredError,
  type StoredOutcome,
} from './record.js';
