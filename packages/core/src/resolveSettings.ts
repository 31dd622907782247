import { type Clock, systemClock } from './Clock.js';
import { type ErrorPolicy, resolveErrorPolicy } from './errorPolicy.js';
import { ConfigurationError } from './errors/ConfigurationError.js';
import type { IdempotencyOptions, InProgressWait } from './IdempotencyOptions.js';
import { requirePositive } from './requirePositive.js';
import { type Serializer, taggedJsonSerializer } from './serializer.js';
import type { IdempotencyStore } from './store/IdempotencyStore.js';

/** The engine's options, checked and with every default filled in. */
export interface IdempotencySettings {
  store: IdempotencyStore;
  leaseMs: number;
  ttlMs: number;
  heartbeatMs: number;
  errorPolicy: ErrorPolicy;
  serializer: Serializer;
  inProgress: 'reject' | Required<InProgressWait>;
  inProgressRetryAfterMs: number;
  clock: Clock;
}

const positive = (name: string, value: number) =>
  requirePositive(name, value, { unit: 'milliseconds' });

/** Checks and fills in the options; throws `ConfigurationError` for a set that cannot work. */
export function resolveSettings(options: IdempotencyOptions): IdempotencySettings {
  if (!options.store) throw new ConfigurationError('createIdempotency needs a `store`.');
  const leaseMs = positive('leaseMs', options.leaseMs ?? 30_000);
  const ttlMs = positive('ttlMs', options.ttlMs ?? 86_400_000);
  const heartbeatMs = positive('heartbeatMs', options.heartbeatMs ?? leaseMs / 3);
  if (heartbeatMs >= leaseMs) {
    throw new ConfigurationError(
      `heartbeatMs (${heartbeatMs}) must be shorter than leaseMs (${leaseMs}), or the lease ` +
        'runs out between two renewals; leaseMs / 3 is a good value.',
    );
  }
  if (ttlMs <= leaseMs) {
    throw new ConfigurationError(
      `ttlMs (${ttlMs}) must be longer than leaseMs (${leaseMs}): a completed key must be ` +
        'remembered for longer than a single attempt may take.',
    );
  }
  if (
    options.retryWindowMs !== undefined &&
    ttlMs < positive('retryWindowMs', options.retryWindowMs)
  ) {
    throw new ConfigurationError(
      `ttlMs (${ttlMs}) is shorter than retryWindowMs (${options.retryWindowMs}): a retry arriving ` +
        'after the record expired would run the work twice. Raise ttlMs to at least retryWindowMs.',
    );
  }
  const wait = options.inProgress ?? 'reject';
  return {
    store: options.store,
    leaseMs,
    ttlMs,
    heartbeatMs,
    errorPolicy: resolveErrorPolicy(options.errorPolicy),
    serializer: options.serializer ?? taggedJsonSerializer,
    inProgress:
      wait === 'reject'
        ? 'reject'
        : {
            waitMs: positive('inProgress.waitMs', wait.waitMs),
            pollMs: positive('inProgress.pollMs', wait.pollMs ?? 50),
          },
    inProgressRetryAfterMs: positive(
      'inProgressRetryAfterMs',
      options.inProgressRetryAfterMs ?? 1_000,
    ),
    clock: options.clock ?? systemClock,
  };
}
