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
-- Redis deletes the key the moment the record counts as gone: at ends, its end or its
-- lease's end while in progress, whichever is later. A non-positive PEXPIRE deletes it.
local function expire_at(key, ends, now, physical)
  if physical == '1' then redis.call('PEXPIRE', key, int(ends - now)) end
end
-- The fence: the record's expires_at when it is in progress under this version and
-- creation time, else nil.
local function held(key, version, created_at)
  local f = redis.call('HMGET', key, 'status', 'version', 'created_at', 'expires_at')
  if f[1] == 'in_progress' and f[2] == version and f[3] == created_at then return f[4] end
  return nil
end
`;

/**
 * claim: ARGV[3] fingerprint, ARGV[4] leaseMs, ARGV[5] ttlMs. Reads the record with one
 * HGETALL and writes only for a fresh claim (no record, or an expired one: reset with
 * version + 1 and no steps) or a takeover (the same fingerprint, lease run out: version +
 * 1, steps kept). Answers `{ 'fresh', now, version, locked_until, expires_at }` (the rest
 * of a fresh record is the request's: the caller builds it without reading it back),
 * `{ 'takeover', now, HGETALL }`, or `{ 'read', now, HGETALL }`: then the caller answers
 * replay, mismatch or in progress from the record and that "now".
 */
const CLAIM = `
local key = KEYS[1]
local now = clock(ARGV[1])
local fingerprint, lease_ms, ttl_ms = ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
local flat = redis.call('HGETALL', key)
local f = {}
for i = 1, #flat, 2 do f[flat[i]] = flat[i + 1] end
local status, locked_until, expires_at = f['status'], f['locked_until'], f['expires_at']
if not status or expired(status, locked_until, expires_at, now) then
  local version = int((tonumber(f['version']) or 0) + 1)
  if status then redis.call('DEL', key) end
  local locked, ends = int(now + lease_ms), int(now + ttl_ms)
  redis.call('HSET', key, 'fingerprint', fingerprint, 'status', 'in_progress',
    'version', version, 'locked_until', locked, 'attempts', '1',
    'created_at', int(now), 'expires_at', ends)
  expire_at(key, math.max(now + lease_ms, now + ttl_ms), now, ARGV[2])
  return {'fresh', int(now), version, locked, ends}
end
if status == 'in_progress' and f['fingerprint'] == fingerprint
    and (not locked_until or tonumber(locked_until) <= now) then
  local ends = math.max(tonumber(expires_at), now + ttl_ms)
  redis.call('HSET', key, 'version', int(tonumber(f['version']) + 1),
    'locked_until', int(now + lease_ms), 'attempts', int(tonumber(f['attempts']) + 1),
    'expires_at', int(ends))
  expire_at(key, math.max(ends, now + lease_ms), now, ARGV[2])
  return {'takeover', int(now), redis.call('HGETALL', key)}
end
return {'read', int(now), flat}
`;

/** complete: ARGV[3] version, ARGV[4] createdAt, ARGV[5] outcome JSON, ARGV[6] ttlMs. */
const COMPLETE = `
local key = KEYS[1]
if not held(key, ARGV[3], ARGV[4]) then return 0 end
local now = clock(ARGV[1])
local ends = now + tonumber(ARGV[6])
redis.call('HSET', key, 'status', 'completed', 'outcome', ARGV[5],
  'completed_at', int(now), 'expires_at', int(ends))
redis.call('HDEL', key, 'locked_until')
expire_at(key, ends, now, ARGV[2])
return 1
`;

/** release (ARGV[5] = '0') or heartbeat (ARGV[5] = leaseMs): the lease ends now + ARGV[5]. */
const EXTEND = `
local key = KEYS[1]
local expires_at = held(key, ARGV[3], ARGV[4])
if not expires_at then return 0 end
local now = clock(ARGV[1])
local locked = now + tonumber(ARGV[5])
redis.call('HSET', key, 'locked_until', int(locked))
expire_at(key, math.max(tonumber(expires_at), locked), now, ARGV[2])
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
  /** Its name, for errors. */
  readonly name: string;
  readonly source: string;
  readonly sha1: string;
}

function script(name: string, body: string): LuaScript {
  const source = `${PRELUDE}${body}`;
  return { name, source, sha1: createHash('sha1').update(source).digest('hex') };
}

export const scripts = {
  claim: script('claim', CLAIM),
  complete: script('complete', COMPLETE),
  extend: script('extend', EXTEND),
  saveStep: script('saveStep', SAVE_STEP),
  read: script('read', READ),
  sweepOne: script('sweepOne', SWEEP_ONE),
};
