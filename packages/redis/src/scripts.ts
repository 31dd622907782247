import { createHash } from 'node:crypto';
import { helpersOf } from './luaHelpers.js';

/**
 * The store's Lua scripts. Each touches exactly one Redis key (the record's, named in
 * `KEYS[1]`), so a Redis Cluster runs it on the one node that owns the key's slot, and Redis
 * runs every script atomically: the claim table and each fence are one step.
 *
 * Every script takes `ARGV[1]`: an injected "now" in epoch milliseconds, or '' for the Redis
 * server's clock (`TIME`), and `ARGV[2]`: '1' when Redis's own expiry should follow the
 * record's end (only with the server's clock: Redis expires keys by that clock and no other).
 *
 * A record is one Redis string, read with one `GET` and written with one `SET` (which sets
 * Redis's expiry in the same command), in lines:
 *
 *     <status> <version> <created_at> <locked_until|-> <expires_at> <attempts> <completed_at|->
 *     <fingerprint, as a JSON string>
 *     <outcome JSON, or nothing while in progress>
 *     ["<recovery point's name>",<its JSON>]      (one line per recovery point)
 *
 * The header's numbers are epoch milliseconds and counters; the other lines are JSON text
 * as the engine sent it (Lua never decodes them, so nothing is reordered or rounded), and
 * JSON text never holds a raw line break, so lines cannot run into each other.
 *
 * A new record written without a script (a plain `SET … NX PX <px>`, see `newKeyClaim`)
 * cannot know the server's time, so its header holds its times relative to the key's
 * expiry, which Redis set to the SET's own time plus `px`:
 *
 *     in_progress 1 @<px>+<lease ms>+<ttl ms> 1 -
 *
 * (five fields, so that a version without this form refuses the record rather than read
 * its times as numbers)
 * `load` reads such a header as the absolute one (created_at = `PEXPIRETIME` − px, to the
 * millisecond), and every script's next write stores it absolute.
 *
 * Records an earlier version stored as a Redis hash (one field per column, `step:<name>`
 * per recovery point) are read as the same lines (in `load`), and written back as a string
 * by the next write.
 */

/**
 * claim: ARGV[3] fingerprint (as a JSON string), ARGV[4] leaseMs, ARGV[5] ttlMs. Reads the
 * record with one `GET` and writes only for a fresh claim (no record, or an expired one:
 * reset with version + 1 and no steps) or a takeover (the same fingerprint, lease run out:
 * version + 1, steps kept). Answers `{ 'fresh', now, version, locked_until, expires_at }`
 * (the rest of a fresh record is the request's: the caller builds it without reading it
 * back), `{ 'takeover', now, record }`, or `{ 'read', now, record }`: then the caller
 * answers replay, mismatch or in progress from the record and that "now".
 */
const CLAIM = `
local key = KEYS[1]
local now = clock(ARGV[1])
local fingerprint, lease_ms, ttl_ms = ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
local rec = load(key)
local status, version, created_at, locked_until, expires_at, attempts, completed_at, at
if rec then
  status, version, created_at, locked_until, expires_at, attempts, completed_at, at = header(rec)
  if not status then
    return redis.error_reply('ERR idem: ' .. key .. ' holds a value that is not an idempotency record')
  end
end
if not rec or expired(status, locked_until, expires_at, now) then
  local fresh = int((tonumber(version) or 0) + 1)
  local locked, ends = int(now + lease_ms), int(now + ttl_ms)
  put(key, record('in_progress', fresh, int(now), locked, ends, '1', '-', fingerprint .. '\\n\\n'),
    math.max(now + lease_ms, now + ttl_ms), now, ARGV[2])
  return {'fresh', int(now), fresh, locked, ends}
end
if status == 'in_progress' and (locked_until == '-' or tonumber(locked_until) <= now)
    and string.sub(rec, at, at + #fingerprint) == fingerprint .. '\\n' then
  local ends = math.max(tonumber(expires_at), now + ttl_ms)
  local taken = record('in_progress', int(tonumber(version) + 1), created_at,
    int(now + lease_ms), int(ends), int(tonumber(attempts) + 1), completed_at,
    string.sub(rec, at))
  put(key, taken, math.max(ends, now + lease_ms), now, ARGV[2])
  return {'takeover', int(now), taken}
end
return {'read', int(now), rec}
`;

/**
 * The first step of complete where new keys are claimed by a plain SET (`newKeyClaim`), run
 * before the helpers are built (Redis makes each a closure on every call): the completion
 * of a record exactly as that SET wrote it (version 1, one attempt, its times relative to
 * the key's expiry, no recovery point), on the server's clock, by the token whose creation
 * time that expiry gives (compared as text, as `held` does). It writes what COMPLETE writes
 * for that record, in about three quarters of Redis's time: one pattern instead of the
 * header's fields, no helper. Anything else (a record a script wrote, a token of another
 * incarnation, an expiry removed, a hash record) goes on to COMPLETE, which reads the key
 * again.
 */
const COMPLETE_NEW_KEY = `
if ARGV[1] == '' and ARGV[2] == '1' and ARGV[3] == '1' then
  local rec = redis.pcall('GET', KEYS[1])
  local px, fingerprint
  if type(rec) == 'string' then
    px, fingerprint = string.match(rec, '^in_progress 1 @(%d+)%+%d+%+%d+ 1 %-\\n([^\\n]*)\\n\\n$')
  end
  local expiry = px and redis.call('PEXPIRETIME', KEYS[1])
  if expiry and expiry >= 0 and string.format('%.0f', expiry - tonumber(px)) == ARGV[4] then
    local time = redis.call('TIME')
    local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
    local ends = now + tonumber(ARGV[6])
    if ends > now then
      redis.call('SET', KEYS[1], 'completed 1 ' .. ARGV[4] .. ' - ' .. string.format('%.0f', ends) ..
        ' 1 ' .. string.format('%.0f', now) .. '\\n' .. fingerprint .. '\\n' .. ARGV[5] .. '\\n',
        'PXAT', string.format('%.0f', math.max(ends - 1, now + 1)))
      return 1
    end
  end
end
`;

/** complete: ARGV[3] version, ARGV[4] createdAt, ARGV[5] outcome JSON, ARGV[6] ttlMs. */
const COMPLETE = `
local key = KEYS[1]
local rec, _, _, attempts, _, at = held(key, ARGV[3], ARGV[4])
if not rec then return 0 end
local now = clock(ARGV[1])
local ends = now + tonumber(ARGV[6])
local fingerprint_end = string.find(rec, '\\n', at, true)
local outcome_end = string.find(rec, '\\n', fingerprint_end + 1, true)
put(key, record('completed', ARGV[3], ARGV[4], '-', int(ends), attempts, int(now),
    string.sub(rec, at, fingerprint_end) .. ARGV[5] .. string.sub(rec, outcome_end)),
  ends, now, ARGV[2])
return 1
`;

/** release (ARGV[5] = '0') or heartbeat (ARGV[5] = leaseMs): the lease ends now + ARGV[5]. */
const EXTEND = `
local key = KEYS[1]
local rec, _, expires_at, attempts, completed_at, at = held(key, ARGV[3], ARGV[4])
if not rec then return 0 end
local now = clock(ARGV[1])
local locked = now + tonumber(ARGV[5])
put(key, record('in_progress', ARGV[3], ARGV[4], int(locked), int(expires_at), attempts,
    completed_at, string.sub(rec, at)),
  math.max(tonumber(expires_at), locked), now, ARGV[2])
return 1
`;

/**
 * saveStep: ARGV[5] the recovery point's line, \`["<name>",<value JSON>]\`. A step name is
 * JSON text, never code. A later line of the same name wins.
 */
const SAVE_STEP = `
local key = KEYS[1]
local rec, locked_until, expires_at, attempts, completed_at, at = held(key, ARGV[3], ARGV[4])
if not rec then return 0 end
redis.call('SET', key, record('in_progress', ARGV[3], ARGV[4], int(locked_until), int(expires_at),
  attempts, completed_at, string.sub(rec, at)) .. ARGV[5] .. '\\n', 'KEEPTTL')
return 1
`;

/** get: `{ now, record or '' }`; the caller judges expiry with core's isExpired. */
const READ = `
return {int(clock(ARGV[1])), load(KEYS[1]) or ''}
`;

/** sweep of one key: deletes it if the record has expired; answers 1 or 0. */
const SWEEP_ONE = `
local key = KEYS[1]
local now = clock(ARGV[1])
local rec = load(key)
if not rec then return 0 end
local status, _, _, locked_until, expires_at = header(rec)
if status and expired(status, locked_until, expires_at, now) then return redis.call('DEL', key) end
return 0
`;

/** A script's source and the SHA-1 that `EVALSHA` names it by. */
export interface LuaScript {
  /** Its name, for errors. */
  readonly name: string;
  readonly source: string;
  readonly sha1: string;
}

/** A script of `body` and the helpers it calls, after `first` (which calls none). */
function script(name: string, body: string, first = ''): LuaScript {
  const source = `${first}${helpersOf(body)}${body}`;
  return { name, source, sha1: createHash('sha1').update(source).digest('hex') };
}

export const scripts = {
  claim: script('claim', CLAIM),
  complete: script('complete', COMPLETE),
  /** complete, after its fast path for a record a new key's plain SET wrote. */
  completeNewKey: script('complete', COMPLETE, COMPLETE_NEW_KEY),
  extend: script('extend', EXTEND),
  saveStep: script('saveStep', SAVE_STEP),
  read: script('read', READ),
  sweepOne: script('sweepOne', SWEEP_ONE),
};
