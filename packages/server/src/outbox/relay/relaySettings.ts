import { type Clock, ConfigurationError, type Random } from '@idem/core';
import { requirePositive } from '@idem/core/store';
import type { PgDatabaseLike } from '../../postgres/PgDatabaseLike.js';
import type { Publisher } from '../OutboxMessage.js';
import type { RelayOptions } from './RelayOptions.js';

/** A relay's options, checked and with their defaults filled in. */
export interface RelaySettings {
  db: PgDatabaseLike;
  publisher: Publisher;
  clock: Clock | undefined;
  /** Pace the loop: the clock's timers, or Node's (which keep a relay-only process alive). */
  timers: Pick<Clock, 'setTimeout' | 'clearTimeout'>;
  /** The clock's time, or `Date.now()`. */
  now: () => number;
  batchSize: number;
  pollIntervalMs: number;
  minPollIntervalMs: number;
  leaseMs: number;
  maxAttempts: number;
  retainSentMs: number;
  cleanupIntervalMs: number;
  ordered: boolean;
  listen: boolean;
  /** The backoff's first ceiling, its cap and its jitter (events, outages and errors alike). */
  baseDelayMs: number;
  maxDelayMs: number;
  random: Random;
}

/** Node's own timers: unlike `systemClock`'s, they keep a relay-only process alive. */
const nodeTimers: RelaySettings['timers'] = {
  setTimeout: (callback, delayMs) => globalThis.setTimeout(callback, delayMs),
  clearTimeout: (handle) => globalThis.clearTimeout(handle as ReturnType<typeof setTimeout>),
};

/** Checks `createRelay`'s options (ConfigurationError) and fills in the defaults. */
export function relaySettings(options: RelayOptions): RelaySettings {
  const { db, publisher, clock } = options;
  // Checked in the order of the options' documentation: the first bad one is named.
  const batchSize = positiveInteger('batchSize', options.batchSize ?? 100);
  const pollIntervalMs = positiveNumber('pollIntervalMs', options.pollIntervalMs ?? 1_000);
  const minPollIntervalMs = positiveNumber(
    'minPollIntervalMs',
    options.minPollIntervalMs ?? pollIntervalMs,
  );
  if (minPollIntervalMs > pollIntervalMs) {
    throw new ConfigurationError(
      `createRelay: minPollIntervalMs (${minPollIntervalMs}) must not exceed pollIntervalMs (${pollIntervalMs}).`,
    );
  }
  return {
    db,
    publisher,
    clock,
    timers: clock ?? nodeTimers,
    now: () => clock?.now() ?? Date.now(),
    batchSize,
    pollIntervalMs,
    minPollIntervalMs,
    leaseMs: positiveNumber('leaseMs', options.leaseMs ?? 30_000),
    maxAttempts: positiveInteger('maxAttempts', options.maxAttempts ?? 10),
    retainSentMs: nonNegative('retainSentMs', options.retainSentMs ?? 0),
    cleanupIntervalMs: nonNegative('cleanupIntervalMs', options.cleanupIntervalMs ?? 60_000),
    ordered: options.ordered ?? false,
    listen: options.listen ?? true,
    baseDelayMs: nonNegative('backoff.baseDelayMs', options.backoff?.baseDelayMs ?? 1_000),
    maxDelayMs: nonNegative('backoff.maxDelayMs', options.backoff?.maxDelayMs ?? 300_000),
    random: options.backoff?.random ?? Math.random,
  };
}

const positiveInteger = (name: string, value: number) =>
  requirePositive(`createRelay: ${name}`, value, { integer: true });

const positiveNumber = (name: string, value: number) =>
  requirePositive(`createRelay: ${name}`, value);

function nonNegative(name: string, value: number): number {
  if (!(Number.isFinite(value) && value >= 0)) {
    throw new ConfigurationError(`createRelay: ${name} must be 0 or more; got ${value}.`);
  }
  return value;
}
