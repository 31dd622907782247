import type { Clock, Random } from '@idem/core';
import type { PgDatabaseLike } from '../../postgres/PgDatabaseLike.js';
import type { Publisher } from '../OutboxMessage.js';
import type { RelayEvent } from './RelayEvent.js';

export interface RelayBackoffOptions {
  /**
   * The ceiling of the delay before the first retry; it doubles with every failure
   * (full jitter: the delay is drawn from [0, ceiling)).
   * @default 1_000
   */
  baseDelayMs?: number;
  /**
   * No retry waits longer than this.
   * @default 300_000 (5 min)
   */
  maxDelayMs?: number;
  /**
   * The jitter's source of randomness, in [0, 1).
   * @default Math.random
   */
  random?: Random;
}

export interface RelayOptions {
  /**
   * The database holding `idem_outbox` (run `migrate(db)` first); postgres-js,
   * node-postgres or PGlite.
   */
  db: PgDatabaseLike;
  /** Where events go: `inProcessPublisher(handlers)`, `jetStreamPublisher(…)` or your own. */
  publisher: Publisher;
  /**
   * The most events claimed (and published concurrently) per round.
   * @default 100
   */
  batchSize?: number;
  /**
   * How long an idle relay waits before looking again. The floor under LISTEN/NOTIFY:
   * events are found within this time even when no notification arrives.
   * @default 1_000
   */
  pollIntervalMs?: number;
  /**
   * The wait after a round that found events but not a full batch: each look that finds
   * nothing doubles it, up to `pollIntervalMs`. Set it low (5–20 ms) when producers
   * enqueue with `notify: false`: under load the relay then looks again within a few
   * milliseconds without NOTIFY, and an idle one backs off to `pollIntervalMs`. (NOTIFY
   * serialises the commits of every notifying transaction on the Postgres server; at high
   * enqueue rates that costs more than the relay's extra looks.)
   * @default pollIntervalMs (no backoff: every wait is pollIntervalMs)
   */
  minPollIntervalMs?: number;
  /**
   * How long a claimed batch is held before another relay may take it over. Must exceed
   * the longest publish of a batch: a relay still publishing after its lease ran out may
   * publish events a second time (consumers deduplicate) or, with `ordered`, out of order.
   * @default 30_000
   */
  leaseMs?: number;
  /**
   * Failed publishes after which an event is dead-lettered: kept, listed by
   * `deadLetters()`, and published again only after `redrive(ids)`. Failures the
   * publisher calls transient (broker unreachable) do not count.
   * @default 10
   */
  maxAttempts?: number;
  /**
   * The delay before an event's next try, by failures so far (core's `backoffDelay`: full
   * jitter, doubling); also paces the relay through publisher outages and database errors.
   * @default { baseDelayMs: 1_000, maxDelayMs: 300_000, random: Math.random }
   */
  backoff?: RelayBackoffOptions;
  /**
   * Publishes the events of one aggregate key strictly one after another, in the order
   * their transactions committed: an event waits while an earlier one of its aggregate is
   * unsent, being retried, or dead-lettered. Events without a key are not held back.
   * @default false
   */
  ordered?: boolean;
  /**
   * Wakes up on `NOTIFY idem_outbox` (sent by `enqueue` at commit) instead of waiting for
   * the next poll. postgres-js, node-postgres (a connection of the `Pool` held while the
   * relay runs, or the app's own `Client`) and PGlite; other drivers poll.
   * @default true
   */
  listen?: boolean;
  /**
   * How long a published event is kept (marked sent, as history) before the cleanup
   * deletes it. 0 deletes its row as it is settled, in the same statement: one write per
   * event less, and nothing for the cleanup to do.
   * @default 0
   */
  retainSentMs?: number;
  /**
   * How often a running relay deletes sent events older than `retainSentMs` (rows kept
   * with `retainSentMs` > 0, or by an earlier relay); 0 turns the automatic cleanup off
   * (call `cleanup()` yourself).
   * @default 60_000
   */
  cleanupIntervalMs?: number;
  /**
   * Time for leases, schedules and timers. By default the DATABASE clock stamps rows, so
   * relays on different machines agree on leases whatever their clock skew, and Node's
   * timers pace the loop (they keep the process alive while the relay runs). Tests pass a
   * `manualClock` and drive the relay with `runOnce()`.
   * @default the database clock, and Node's timers
   */
  clock?: Clock;
  /**
   * Called for every event (publish, failure, dead letter, outage, error), for logs and
   * metrics; exceptions thrown here are swallowed.
   * @default no reporting
   */
  onEvent?: (event: RelayEvent) => void;
}
