/** The Lua helpers the store's scripts share (see `scripts.ts` for the record's layout). */

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
-- Integers as digits: Lua's tostring switches to exponents past 14 digits. A header's field
-- read as text (digits, or '-') is already that.
local function int(n)
  if type(n) == 'string' then return n end
  return string.format('%.0f', n)
end
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
    'relative',
    `
-- A record whose header a plain SET wrote (its times relative to the key's expiry, see
-- above): the header's fields, the times as epoch milliseconds, and where the line after it
-- starts; nil for any other record.
local function relative(key, rec)
  local status, version, px, lease, ttl, attempts, completed_at, at =
    string.match(rec, '^(%S+) (%S+) @(%d+)%+(%d+)%+(%d+) (%S+) (%S+)\\n()')
  if not status then return nil end
  local expiry = redis.call('PEXPIRETIME', key)
  if expiry < 0 then
    error({ err = 'ERR idem: ' .. key .. ' holds a new record whose expiry was removed (PERSIST?): its times are lost' })
  end
  local created = expiry - tonumber(px)
  return status, version, created, created + tonumber(lease), created + tonumber(ttl), attempts,
    completed_at, at
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
    local status, version, created, locked, ends, attempts, completed_at, at = relative(key, rec)
    if not status then return rec end
    return record(status, version, int(created), int(locked), int(ends), attempts, completed_at,
      string.sub(rec, at))
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
-- through the millisecond of its expiry, so the expiry is the millisecond before ends (or
-- ends itself, with one millisecond left): a completed record whose expires_at comes after
-- its key's expiry had not ended when a plain SET … GET found it. The expiry is given as
-- that instant (PXAT), not as a span from now (PX): Redis 7.0 reads its clock again for
-- the SET, which may be a millisecond or more past the script's TIME.
local function put(key, rec, ends, now, physical)
  if physical ~= '1' then
    redis.call('SET', key, rec)
  elseif ends > now then
    redis.call('SET', key, rec, 'PXAT', int(math.max(ends - 1, now + 1)))
  else
    redis.call('DEL', key)
  end
end
`,
  ],
  [
    'held',
    `
-- The fenced record: the record as stored (a relative header left as it is) and its header's
-- fields (the lease's end and the record's as text, or as numbers from a relative header:
-- write them through int), when it is in progress under this version and creation time;
-- else nil. The last value is where the fingerprint line starts in that record.
local function held(key, version, created_at)
  local rec = redis.pcall('GET', key)
  if type(rec) ~= 'string' then rec = load(key) end
  if not rec then return nil end
  local status, v, c, locked_until, expires_at, attempts, completed_at, at = relative(key, rec)
  if status then
    c = int(c)
  else
    status, v, c, locked_until, expires_at, attempts, completed_at, at = header(rec)
  end
  if status == 'in_progress' and v == version and c == created_at then
    return rec, locked_until, expires_at, attempts, completed_at, at
  end
  return nil
end
`,
  ],
];

/** The helpers `body` calls, directly or through another helper, in definition order. */
export function helpersOf(body: string): string {
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
