import { guardFor, IdempotencyError, type IdempotencyErrorOptions } from './IdempotencyError.js';

/**
 * This holder no longer owns the key: its lease ran out and another attempt took over
 * (a higher version), or the record completed or vanished. Nothing was written.
 */
export class LeaseLostError extends IdempotencyError {
  readonly scope: string;
  readonly key: string;
  /** The version (fencing token) this holder had. */
  readonly version: number;

  constructor(scope: string, key: string, version: number, options?: IdempotencyErrorOptions) {
    super(
      'LEASE_LOST',
      `Lost the lease on idempotency key "${key}" (version ${version}): another attempt took it ` +
        'over after the lease expired, so this attempt wrote nothing. Raise leaseMs if handlers ' +
        'legitimately run longer, or keep the heartbeat alive.',
      options,
    );
    this.name = 'LeaseLostError';
    this.scope = scope;
    this.key = key;
    this.version = version;
  }
}

export const isLeaseLostError = guardFor<LeaseLostError>('LEASE_LOST');
