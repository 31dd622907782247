import { type ClaimRequest, type ClaimResult, decideClaim } from '@idem/core/store';
import type { CommandSender } from './RedisConnection.js';
import { freshRecord, recordOf } from './scriptReplies.js';
import type { ServerTime } from './serverClock.js';

/**
 * How much longer than the clock's error a record must live for a claim without a script.
 * A record's creation time names its incarnation in the lease token (versions restart at 1
 * for a key claimed afresh); one stamped up to `error` ms late cannot take the stamp of an
 * incarnation before or after it as long as each lives longer than that.
 */
const LIFETIME_MARGIN_MS = 1_000;

/** Answers a claim, or undefined when the claim script must decide it. */
export type NewKeyClaim = (
  request: ClaimRequest,
  redisKey: string,
) => Promise<ClaimResult | undefined> | undefined;

/**
 * The claim of a key with no record (a new key's first call) and of a completed record
 * (a replay), as one plain `SET <key> <record> NX [PX <ms>] GET`, where the claim script
 * costs Redis a Lua call, `TIME`, `GET` and `SET`:
 *
 * - no record: Redis writes the new record (version 1, one attempt, no steps), stamped with
 *   `time()`'s `now`, and answers nil: claimed. With the server's clock, `now` is an upper
 *   bound of it (see `ServerClockBound`) and the key's expiry covers the bound's error, so
 *   Redis never deletes the record before the end it states.
 * - a completed record that has certainly not expired (its end after `now`): Redis writes
 *   nothing and answers it; the claim table answers replay or mismatch from it.
 * - anything else (a record in progress, one that may have expired, a hash record of 0.1,
 *   a value that is no record): undefined, and the claim script decides, on the server's
 *   clock, as every claim did before.
 *
 * `time` is undefined while the server's clock is unknown: every claim runs the script.
 * `SET … NX … GET` needs Redis 7.0 (Valkey 7.2): on an older server the first refusal turns
 * this off for the store.
 */
export function newKeyClaim(
  command: CommandSender,
  time: () => ServerTime | undefined,
  physicalExpiry: boolean,
): NewKeyClaim {
  let unsupported = false;
  return (request, redisKey) => {
    const { leaseMs, ttlMs } = request;
    if (unsupported || !Number.isInteger(leaseMs) || !Number.isInteger(ttlMs)) return undefined;
    const clock = time();
    if (clock === undefined || !Number.isSafeInteger(clock.now)) return undefined;
    const lifetime = Math.max(leaseMs, ttlMs);
    if (clock.error > 0 && lifetime <= clock.error + LIFETIME_MARGIN_MS) return undefined;
    const { now } = clock;
    const lockedUntil = now + leaseMs;
    const expiresAt = now + ttlMs;
    const text = `in_progress 1 ${now} ${lockedUntil} ${expiresAt} 1 -\n${JSON.stringify(request.fingerprint)}\n\n`;
    const args = ['SET', redisKey, text, 'NX'];
    if (physicalExpiry) args.push('PX', String(Math.ceil(lifetime + clock.error)));
    args.push('GET');
    return command('claim (SET NX)', redisKey, args).then(
      (reply): ClaimResult | undefined => {
        if (reply === null || reply === undefined) {
          return {
            status: 'claimed',
            takeover: false,
            record: freshRecord(request, now, 1, { lockedUntil, expiresAt }),
          };
        }
        const existing = String(reply);
        if (!existing.startsWith('completed ')) return undefined;
        let record: ReturnType<typeof recordOf>;
        try {
          record = recordOf(request.scope, request.key, existing);
        } catch {
          return undefined; // not the store's layout: the script says what the key holds
        }
        if (!(record.expiresAt > now)) return undefined;
        const decision = decideClaim(record, request, now);
        return decision.status === 'claimed' ? undefined : decision;
      },
      (error: unknown) => {
        const message = error instanceof Error ? error.message : '';
        // A hash record of 0.1: only the script reads it.
        if (message.startsWith('WRONGTYPE')) return undefined;
        if (message.startsWith('ERR syntax error')) {
          unsupported = true; // SET … NX … GET needs Redis 7.0
          return undefined;
        }
        throw error;
      },
    );
  };
}
