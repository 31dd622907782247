import { createHash } from 'node:crypto';

/**
 * The store's Lua scripts. Each touches exactly one Redis key (the record's hash, named in
 * `KEYS[1]`), so a Redis Cluster runs it on the one node that owns the key's slot, and Redis
 * runs every script atomically: the claim table and each fence are one step.
 *
 * Every script takes `ARGV[1]`: an injected "now" in epoch milliseconds, or '' for the Redis
 * server's clock (`TIME`), and `ARGV[2]`: '1' when Redis's own expiry should follow the
 * record's end (only with the server's clock: Redis expires keys by that clock and no other).
 *
 * The record's hash: `fingerprint`, `status`, `version`, `locked_until` (absent once
 * completed), `attempts`, `outcome` (JSON, once completed), `created_at`, `completed_at`,
 * `expires_at`, and one `step:<name>` field per recovery point (its JSON). Values are kept as
 * the JSON text the engine sent: Lua never decodes them, so nothing is reordered or rounded.
 */
const PRELUDE = `
local function clock(override)
  if override ~= '' then return tonumber(override) end
  local time = redis.call('TIME')
  return tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end
-- Integers as digits: Lua's tostring switches to exponents past 14 digits.
local function int(n) return string.format('%.0f', n) end
-- core's isExpired: past expires_at and, for an in-progress record, past its lease too.
local function expired(status, locked_until, expires_at, now)
  return tonumber(expires_at) <= now
    and (status == 'completed' or not locked_until or tonumber(locked_until) <= now)
end
-- Redis deletes the key the moment the record counts as gone: its end, or its lease's end
-- while in progress. A non-positive PEXPIRE deletes it at once.
local function expire_at_end(key, now, physical)
  if physical ~= '1' then return end
  local f = redis.call('HMGET', key, 'status', 'locked_until', 'expires_at')
  local ends = tonumber(f[3])
  if f[1] == 'in_progress' and f[2] then ends = math.max(ends, tonumber(f[2])) end
  redis.call('PEXPIRE', key, int(ends - now))
end
-- The fence: the record is in progress under this version and creation time.
local function held(key, version, created_at)
  local f = redis.call('HMGET', key, 'status', 'version', 'created_at')
  return f[1] == 'in_progress' and f[2] == version and f[3] == created_at
end
`;

/**
 * claim: ARGV[3] fingerprint, ARGV[4] leaseMs, ARGV[5] ttlMs. Writes only for a fresh claim
 * (no record, or an expired one: reset with version + 1 and no steps) or a takeover (the
 * same fingerprint, lease run out: version + 1, steps kept). Answers
 * `{ 'fresh' | 'takeover' | 'read', now, HGETALL }`; on 'read' the caller answers replay,
 * mismatch or in progress from the record and that "now".
 */
const CLAIM = `
local key = KEYS[1]
local now = clock(ARGV[1])
local fingerprint, lease_ms, ttl_ms = ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
local f = redis.call('HMGET', key,
  'status', 'version', 'locked_until', 'expires_at', 'fingerprint', 'attempts')
local answer
if not f[1] or expired(f[1], f[3], f[4], now) then
  local version = (tonumber(f[2]) or 0) + 1
  redis.call('DEL', key)
  redis.call('HSET', key, 'fingerprint', fingerprint, 'status', 'in_progress',
    'version', int(version), 'locked_until', int(now + lease_ms), 'attempts', '1',
    'created_at', int(now), 'expires_at', int(now + ttl_ms))
  answer = 'fresh'
elseif f[1] == 'in_progress' and f[5] == fingerprint
    and (not f[3] or tonumber(f[3]) <= now) then
  redis.call('HSET', key, 'version', int(tonumber(f[2]) + 1),
    'locked_until', int(now + lease_ms), 'attempts', int(tonumber(f[6]) + 1),
    'expires_at', int(math.max(tonumber(f[4]), now + ttl_ms)))
  answer = 'takeover'
else
  return {'read', int(now), redis.call('HGETALL', key)}
end
expire_at_end(key, now, ARGV[2])
return {answer, int(now), redis.call('HGETALL', key)}
`;

/** complete: ARGV[3] version, ARGV[4] createdAt, ARGV[5] outcome JSON, ARGV[6] ttlMs. */
const COMPLETE = `
local key = KEYS[1]
if not held(key, ARGV[3], ARGV[4]) then return 0 end
local now = clock(ARGV[1])
redis.call('HSET', key, 'status', 'completed', 'outcome', ARGV[5],
  'completed_at', int(now), 'expires_at', int(now + tonumber(ARGV[6])))
redis.call('HDEL', key, 'locked_until')
expire_at_end(key, now, ARGV[2])
return 1
`;

/** release (ARGV[5] = '0') or heartbeat (ARGV[5] = leaseMs): the lease ends now + ARGV[5]. */
const EXTEND = `
local key = KEYS[1]
if not held(key, ARGV[3], ARGV[4]) then return 0 end
local now = clock(ARGV[1])
redis.call('HSET', key, 'locked_until', int(now + tonumber(ARGV[5])))
expire_at_end(key, now, ARGV[2])
return 1
`;

/** saveStep: ARGV[5] name, ARGV[6] value JSON. A step name is a field name, never code. */
const SAVE_STEP = `
local key = KEYS[1]
if not held(key, ARGV[3], ARGV[4]) then return 0 end
redis.call('HSET', key, 'step:' .. ARGV[5], ARGV[6])
return 1
`;

/** get: `{ now, HGETALL }`; the caller judges expiry with core's isExpired. */
const READ = `
return {int(clock(ARGV[1])), redis.call('HGETALL', KEYS[1])}
`;

/** sweep of one key: deletes it if the record has expired; answers 1 or 0. */
const SWEEP_ONE = `
local key = KEYS[1]
local now = clock(ARGV[1])
local f = redis.call('HMGET', key, 'status', 'locked_until', 'expires_at')
if f[1] and expired(f[1], f[2], f[3], now) then return redis.call('DEL', key) end
return 0
`;

/** A script's source and the SHA-1 that `EVALSHA` names it by. */
export interface LuaScript {
  readonly source: string;
  readonly sha1: string;
}

function script(body: string): LuaScript {
  const source = `${PRELUDE}${body}`;
  return { source, sha1: createHash('sha1').update(source).digest('hex') };
}

export const scripts = {
  claim: script(CLAIM),
  complete: script(COMPLETE),
  extend: script(EXTEND),
  saveStep: script(SAVE_STEP),
  read: script(READ),
  sweepOne: script(SWEEP_ONE),
};
