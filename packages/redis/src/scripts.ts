import { createHash } from 'node:crypto';

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
 *     in_progress 1 @<px> +<lease ms> +<ttl ms> 1 -
 *
 * `load` reads such a header as the absolute one (created_at = `PEXPIRETIME` − px, to the
 * millisecond), and every script's next write stores it absolute.
 *
 * Records an earlier version stored as a Redis hash (one field per column, `step:<name>`
 * per recovery point) are read as the same lines (in `load`), and written back as a string
 * by the next write.
 */

/**
 * The helpers scripts share, in the order they must be defined (a helper uses only those
 * before it). A script carries only the ones it calls, directly or through another: each is
 * a closure Redis builds again on every call.
 */
const HELPERS: ReadonlyArray<readonly [name: string, source: string]> = [
  [
    'clock',
    `
local function clock(override)
  if override ~= '' then return tonumber(override) end
  local time = redis.call('TIME')
  return tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end
`,
  ],
  [
    'int',
    `
-- Integers as digits: Lua's tostring switches to exponents past 14 digits.
local function int(n) return string.format('%.0f', n) end
`,
  ],
  [
    'expired',
    `
-- core's isExpired: past expires_at and, for an in-progress record, past its lease too.
local function expired(status, locked_until, expires_at, now)
  return tonumber(expires_at) <= now
    and (status == 'completed' or locked_until == '-' or tonumber(locked_until) <= now)
end
`,
  ],
  [
    'header',
    `
-- The header's fields, and where the line after it starts; nil for a value that is not a
-- record.
local function header(rec)
  return string.match(rec, '^(%S+) (%S+) (%S+) (%S+) (%S+) (%S+) (%S+)\\n()')
end
`,
  ],
  [
    'record',
    `
local function record(status, version, created_at, locked_until, expires_at, attempts,
    completed_at, rest)
  return status .. ' ' .. version .. ' ' .. created_at .. ' ' .. locked_until .. ' ' ..
    expires_at .. ' ' .. attempts .. ' ' .. completed_at .. '\\n' .. rest
end
`,
  ],
  [
    'load',
    `
-- The record at key, or false when there is none. A new record that a plain SET wrote has
-- its times relative to the key's expiry (see above): they are read as epoch milliseconds.
-- A hash record (0.1) is read as the same lines; its helpers are built only then.
local function load(key)
  local rec = redis.pcall('GET', key)
  if type(rec) == 'string' then
    local head, px, lease, ttl, at = string.match(rec, '^(%S+ %S+ )@(%d+) %+(%d+) %+(%d+) ()')
    if not head then return rec end
    local created = redis.call('PEXPIRETIME', key) - tonumber(px)
    return head .. int(created) .. ' ' .. int(created + tonumber(lease)) .. ' ' ..
      int(created + tonumber(ttl)) .. ' ' .. string.sub(rec, at)
  end
  if type(rec) ~= 'table' then return rec end
  -- A string as JSON.stringify writes it: the fingerprint and step names.
  local function json_string(s)
    local escapes = { ['"'] = '\\\\"', ['\\\\'] = '\\\\\\\\', ['\\b'] = '\\\\b', ['\\f'] = '\\\\f',
      ['\\n'] = '\\\\n', ['\\r'] = '\\\\r', ['\\t'] = '\\\\t' }
    return '"' .. (string.gsub(s, '[%z\\1-\\31"\\\\]', function(c)
      return escapes[c] or string.format('\\\\u%04x', string.byte(c))
    end)) .. '"'
  end
  local flat = redis.call('HGETALL', key)
  local f, steps = {}, {}
  for i = 1, #flat, 2 do
    local name = flat[i]
    if string.sub(name, 1, 5) == 'step:' then
      steps[#steps + 1] = '[' .. json_string(string.sub(name, 6)) .. ',' .. flat[i + 1] .. ']\\n'
    else
      f[name] = flat[i + 1]
    end
  end
  if not f['status'] then return false end
  return record(f['status'], f['version'], f['created_at'], f['locked_until'] or '-',
    f['expires_at'], f['attempts'], f['completed_at'] or '-',
    json_string(f['fingerprint']) .. '\\n' .. (f['outcome'] or '') .. '\\n' .. table.concat(steps))
end
`,
  ],
  [
    'put',
    `
-- Writes the record. Redis deletes the key the moment the record counts as gone: at ends,
-- its end or its lease's end while in progress, whichever is later (only on the server's
-- clock, physical = '1'); a record already gone then is deleted now. Redis keeps a key
-- through the millisecond of its expiry, so the expiry is the millisecond before ends: a
-- key that exists holds a record that has not ended by the server's clock, which is how a
-- plain SET … GET tells a live completed record (its expires_at after the key's expiry).
local function put(key, rec, ends, now, physical)
  if physical ~= '1' then
    redis.call('SET', key, rec)
  elseif ends > now then
    redis.call('SET', key, rec, 'PX', int(math.max(1, ends - now - 1)))
  else
    redis.call('DEL', key)
  end
end
`,
  ],
  [
    'held',
    `
-- The fenced record: its header when it is in progress under this version and creation
-- time, else nil.
local function held(key, version, created_at)
  local rec = load(key)
  if not rec then return nil end
  local status, v, c, locked_until, expires_at, attempts, completed_at, at = header(rec)
  if status == 'in_progress' and v == version and c == created_at then
    return rec, locked_until, expires_at, attempts, completed_at, at
  end
  return nil
end
`,
  ],
];

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
put(key, record('in_progress', ARGV[3], ARGV[4], int(locked), expires_at, attempts,
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
local rec = held(key, ARGV[3], ARGV[4])
if not rec then return 0 end
redis.call('SET', key, rec .. ARGV[5] .. '\\n', 'KEEPTTL')
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

/**
 * retract: ARGV[3] the record a plain `SET … NX` wrote. Deletes the key only while it holds
 * exactly that text (nobody has taken over, completed or changed it since); answers 1 or 0.
 */
const RETRACT = `
if redis.pcall('GET', KEYS[1]) == ARGV[3] then return redis.call('DEL', KEYS[1]) end
return 0
`;

/** A script's source and the SHA-1 that `EVALSHA` names it by. */
export interface LuaScript {
  /** Its name, for errors. */
  readonly name: string;
  readonly source: string;
  readonly sha1: string;
}

/** The helpers `body` calls, directly or through another helper, in definition order. */
function helpersOf(body: string): string {
  const needed: string[] = [];
  let text = body;
  for (const [name, source] of [...HELPERS].reverse()) {
    if (new RegExp(`\\b${name}\\(`).test(text)) {
      needed.unshift(source);
      text += source;
    }
  }
  return needed.join('');
}

function script(name: string, body: string): LuaScript {
  const source = `${helpersOf(body)}${body}`;
  return { name, source, sha1: createHash('sha1').update(source).digest('hex') };
}

export const scripts = {
  claim: script('claim', CLAIM),
  complete: script('complete', COMPLETE),
  extend: script('extend', EXTEND),
  saveStep: script('saveStep', SAVE_STEP),
  read: script('read', READ),
  sweepOne: script('sweepOne', SWEEP_ONE),
  retract: script('retract', RETRACT),
};
