import type { Clock } from '@idem/core';
import {
  type ClaimRequest,
  type ClaimResult,
  claimedNew,
  decideClaim,
  type IdempotencyRecord,
} from '@idem/core/store';
import type { CommandSender } from './RedisConnection.js';
import { recordOf } from './scriptReplies.js';

/** Answers a claim, or undefined when the claim script must decide it. */
export interface NewKeyClaim {
  (request: ClaimRequest, redisKey: string): Promise<ClaimResult | undefined> | undefined;
  /** False once the server refused the plain commands: from then on the script claims. */
  readonly active: boolean;
}

/**
 * The claim of a key with no record (a new key's first call) and of a completed record
 * (a replay) as plain commands, where the claim script costs Redis a Lua call, `TIME`,
 * `GET` and `SET`. On the server's clock, two commands sent together (Redis runs them one
 * after the other as they arrive):
 *
 * 1. `SET <key> <new record> NX PX <px> GET`: where the key has no record, Redis writes the
 *    new one (version 1, one attempt, no steps), its expiry at the SET's own millisecond
 *    plus `px` (the record's lifetime, the longer of lease and TTL, less the millisecond
 *    Redis keeps a key through its expiry), and answers nil; otherwise it writes nothing
 *    and answers what the key holds.
 * 2. `PEXPIRETIME <key>`: the key's expiry. For the new record, its creation time is exactly
 *    the server's millisecond of the SET (expiry − px); the record stores its times relative
 *    to that expiry (`@<px>+<lease>+<ttl>`), which the scripts read the same way, so every
 *    reader agrees with the lease token to the millisecond. For an existing key, the key
 *    was there when the SET ran, so the server's "now" was at most its expiry.
 *
 * Then:
 * - nil: claimed. Unless the answers took as long as the record lives (the record may have
 *   expired and another taken its place before `PEXPIRETIME` ran) or the expiry could not
 *   be read: then the new record is left to its lease, held by nobody, as after a claim
 *   whose reply was lost, and the script answers this call (in progress).
 * - a completed record whose end comes after the key's expiry (as every completion writes
 *   it): it had not expired when the SET ran, so replay or mismatch, by core's claim table.
 * - anything else (a record in progress, one that may have expired, a hash record of 0.1, a
 *   value that is no record): undefined, and the claim script decides, as before.
 *
 * With an injected `clock` there is no Redis expiry to read: the new record is stamped
 * with `clock.now()` as the scripts would, by one `SET <key> <record> NX GET`.
 *
 * `SET … NX … GET` and `PEXPIRETIME` need Redis 7.0 (Valkey 7.2): on an older server the
 * first refusal turns this off for the store. `PEXPIRETIME` is asked once before the first
 * plain SET, so that a user whose ACL refuses it never writes a record only it can read. A
 * client that is not connected (`ready()` false: node-redis queues commands until it
 * reconnects) leaves every claim to the script.
 */
export function newKeyClaim(
  command: CommandSender,
  clock: Clock | undefined,
  ready: () => boolean,
): NewKeyClaim {
  let unsupported = false;
  /**
   * A `PEXPIRETIME` answered before the first plain SET: a server that refuses it (an ACL
   * without it) must never get a record whose times only it can read, which no script run
   * by that user could read either. Unset again after an error that is not a refusal.
   */
  let expiryReadable: Promise<void> | undefined;
  let expiryChecked = false;
  const refused = (error: unknown): undefined => {
    const message = error instanceof Error ? error.message : '';
    // A hash record of 0.1: only the script reads it.
    if (message.startsWith('WRONGTYPE')) return undefined;
    if (
      message.startsWith('ERR syntax error') ||
      message.startsWith('ERR unknown command') ||
      message.startsWith('NOPERM')
    ) {
      unsupported = true; // Redis before 7.0, or a user whose ACL refuses these commands
      return undefined;
    }
    throw error;
  };
  const claim = (
    request: ClaimRequest,
    redisKey: string,
  ): Promise<ClaimResult | undefined> | undefined => {
    const { leaseMs, ttlMs } = request;
    if (unsupported || !Number.isInteger(leaseMs) || !Number.isInteger(ttlMs)) return undefined;
    if (!ready()) return undefined;
    const fingerprint = JSON.stringify(request.fingerprint);
    if (clock) {
      const now = clock.now();
      if (!Number.isSafeInteger(now)) return undefined;
      const text = `in_progress 1 ${now} ${now + leaseMs} ${now + ttlMs} 1 -\n${fingerprint}\n\n`;
      return command('claim (SET NX)', redisKey, ['SET', redisKey, text, 'NX', 'GET']).then(
        (reply) =>
          reply === null || reply === undefined
            ? claimedNew(request, now)
            : answerExisting(request, reply, now),
        refused,
      );
    }
    const lifetime = Math.max(leaseMs, ttlMs);
    if (lifetime < 2) return undefined;
    if (!expiryChecked) {
      // Once per store (again after an error that is no refusal), one round trip before; the
      // claims asked for meanwhile wait for its answer too.
      expiryReadable ??= command('claim (PEXPIRETIME)', redisKey, ['PEXPIRETIME', redisKey]).then(
        () => {
          expiryChecked = true;
        },
        (error: unknown) => {
          expiryReadable = undefined;
          refused(error);
        },
      );
      return expiryReadable.then(() => claim(request, redisKey));
    }
    return claimOnServerClock(command, request, redisKey, fingerprint, refused);
  };
  return Object.defineProperty(claim, 'active', { get: () => !unsupported }) as NewKeyClaim;
}

/**
 * The claim on the server's clock (see `newKeyClaim`): the new record with its times
 * relative to the key's expiry, by a `SET … NX PX … GET` with the key's `PEXPIRETIME` sent
 * right behind it; `refused` judges an error of either.
 */
function claimOnServerClock(
  command: CommandSender,
  request: ClaimRequest,
  redisKey: string,
  fingerprint: string,
  refused: (error: unknown) => undefined,
): Promise<ClaimResult | undefined> {
  const { leaseMs, ttlMs } = request;
  const lifetime = Math.max(leaseMs, ttlMs);
  const px = lifetime - 1;
  const text = `in_progress 1 @${px}+${leaseMs}+${ttlMs} 1 -\n${fingerprint}\n\n`;
  const sentAt = performance.now();
  // Sent in this order, in this tick, on the one connection: Redis runs them in turn.
  const set = command('claim (SET NX)', redisKey, [
    'SET',
    redisKey,
    text,
    'NX',
    'PX',
    String(px),
    'GET',
  ]);
  const expiry = command('claim (PEXPIRETIME)', redisKey, ['PEXPIRETIME', redisKey]);
  return Promise.allSettled([set, expiry]).then(([written, expireAt]) => {
    if (written.status === 'rejected') return refused(written.reason);
    const reply = written.value;
    const keyExpiry = expireAt.status === 'fulfilled' ? Number(expireAt.value) : Number.NaN;
    if (reply !== null && reply !== undefined) {
      if (expireAt.status === 'rejected') return refused(expireAt.reason);
      return keyExpiry > 0 ? answerExisting(request, reply, keyExpiry) : undefined;
    }
    // The SET wrote the new record: it stands only with its exact creation time. Without
    // it the record is left to its lease, held by nobody, as a claim whose reply was lost
    // is: the script answers this call in progress, and a retry takes it over later.
    const created = keyExpiry - px;
    if (created > 0 && performance.now() - sentAt < lifetime) return claimedNew(request, created);
    return expireAt.status === 'rejected' ? refused(expireAt.reason) : undefined;
  });
}

/**
 * A claim's answer from the record a SET found: replay or mismatch for a completed record
 * whose end comes after `aliveUntil` (the server's "now" was before that when the SET ran);
 * undefined (the script decides) for anything else.
 */
function answerExisting(
  request: ClaimRequest,
  reply: unknown,
  aliveUntil: number,
): ClaimResult | undefined {
  const existing = String(reply);
  if (!existing.startsWith('completed ')) return undefined;
  let record: IdempotencyRecord;
  try {
    record = recordOf(request.scope, request.key, existing);
  } catch {
    return undefined; // not the store's layout: the script says what the key holds
  }
  // Not expired at any "now" up to aliveUntil; judged at aliveUntil, replay or mismatch.
  if (!(record.expiresAt > aliveUntil)) return undefined;
  const decision = decideClaim(record, request, aliveUntil);
  return decision.status === 'claimed' ? undefined : decision;
}
