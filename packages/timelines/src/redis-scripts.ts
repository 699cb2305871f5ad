// Server-side steps that must be atomic per list: conditional add with trim, scans, rebuild merge.
// Batch scripts take many lists with shared arguments and handle each list on its own, so a
// fan-out costs one call per few hundred readers. Their keys travel in ARGV (ARGV[1] = how many,
// then the keys, then the arguments) and only the first is declared, because Cluster refuses
// declared keys of different slots; the store only batches keys served by one node, which a
// script may touch with `allow-cross-slot-keys` (Redis 7). Strings are only compared for
// equality in Lua (Redis sets LC_COLLATE, so Lua's `<` on strings would follow the locale);
// order questions go to the sorted set itself via ZRANK. Memory-store twin: memory-list.ts. Long
// because it holds the Lua sources, which read best whole and side by side.
import { createHash } from 'node:crypto'

export interface LuaScript {
  source: string
  sha: string
}

const SHEBANG = '#!lua flags=allow-cross-slot-keys\n'

const PRELUDE = `
local READY, TRUNCATED, WARMING, WARMING_T = '\\127r', '\\127t', '\\127w', '\\127x'
-- The state a list moves to once it has a ghost.
local GHOSTED = {
  [READY] = TRUNCATED, [TRUNCATED] = TRUNCATED, [WARMING] = WARMING_T, [WARMING_T] = WARMING_T,
}
local function is_ghost(m)
  return m ~= nil and string.byte(m, -1) == 0
end
-- The sentinel (highest member), or false when the list is not materialised.
local function state(k)
  local s = redis.call('ZRANGE', k, -1, -1)[1]
  if s and GHOSTED[s] then return s end
  return false
end
local function set_state(k, from, to)
  if from ~= to then
    redis.call('ZREM', k, from)
    redis.call('ZADD', k, 0, to)
  end
end
-- Pops the lowest members (the ghost, then the oldest items) down to target items; the highest
-- popped item plus \\0 becomes the horizon.
local function trim(k, s, items, target)
  local g = (s == TRUNCATED or s == WARMING_T) and 1 or 0
  local popped = redis.call('ZPOPMIN', k, g + items - target)
  redis.call('ZADD', k, 0, popped[#popped - 1] .. '\\0')
  set_state(k, s, GHOSTED[s])
end
-- A batch call's lists and arguments.
local function batch()
  local nk = tonumber(ARGV[1])
  local keys, args = {}, {}
  for i = 2, nk + 1 do keys[#keys + 1] = ARGV[i] end
  for i = nk + 2, #ARGV do args[#args + 1] = ARGV[i] end
  return keys, args
end
-- A rebuild's lease: beside the list, in its slot; holds the rebuilding call's token.
local function lease_of(k)
  return k .. ':w'
end
-- A removal or a drop reaching a list under rebuild cancels the rebuild: the Postgres read behind
-- it may predate the removal, so what it would materialise could bring a removed item back.
local function cancel_rebuild(k, s)
  if s == WARMING or s == WARMING_T then
    redis.call('DEL', k, lease_of(k))
    return true
  end
  return false
end
-- Heads: a hash beside the lists (one per store; '' where there is none, as on a Cluster) giving
-- each materialised author list the time of its highest member, so that a home read can pass
-- over the lists with nothing new enough for its page without reading them. The time is the
-- canonical sortAt's digits down to the second (YYYYMMDDHHMMSS, exact as a number): for members
-- of that shape, a higher member never has a lower time, so a head timed below a floor's time
-- lies below the floor in byte order. A head of another shape gets the highest time (always
-- read), an empty list 0. A hash, not a sorted set: a score is formatted into a string on every
-- read of it. A list has a time only while materialised: every step that unmaterialises an
-- author list removes it; a time may stay higher than the list's head (after a removal), which
-- only costs a read.
local function time_of(m)
  local y, mo, d, h, mi, s = string.match(m, '^(%d%d%d%d)%-(%d%d)%-(%d%d)T(%d%d):(%d%d):(%d%d)%.%d%d%dZ\\1')
  if not y then return nil end
  return y .. mo .. d .. h .. mi .. s
end
-- Versions: a hash beside the heads (heads .. ':v') giving each materialised author list a number
-- that changes with every write to it, so that a process keeping a copy of a list's top (a home
-- read's celebrity lists, redis-store.ts) can ask whether its copy still holds instead of reading
-- the list again. The numbers come from one counter (heads .. ':n') begun at Redis's clock in µs
-- when it is missing: a number is never given twice, not even after Redis lost its data, as the
-- counter grows by one a write, slower than the clock. Every step that unmaterialises an author
-- list removes its number with its time. Formatted with %d: Lua would print a number this size
-- in exponent form.
local function bump(heads, k)
  local n = heads .. ':n'
  local v = redis.call('INCR', n)
  if v == 1 then
    local t = redis.call('TIME')
    v = tonumber(t[1]) * 1000000 + tonumber(t[2])
    redis.call('SET', n, string.format('%d', v))
  end
  redis.call('HSET', heads .. ':v', k, string.format('%d', v))
end
-- A list's head timed and its version moved on, after a write to it.
local function set_head(heads, k)
  local top = redis.call('ZRANGE', k, '(\\127', '-', 'BYLEX', 'REV', 'LIMIT', 0, 1)[1]
  redis.call('HSET', heads, k, top and (time_of(top) or '99999999999999') or '0')
  bump(heads, k)
end
-- A list unmaterialised: its time and version go.
local function unversion(heads, k)
  redis.call('HDEL', heads, k)
  redis.call('HDEL', heads .. ':v', k)
end
local function feed_field(m)
  local r = string.find(m, '\\2', 1, true)
  if r then return string.sub(m, r + 1), true end
  local a = string.find(m, '\\1', 1, true)
  local b = string.find(m, '\\1', a + 1, true)
  return string.sub(m, b + 1), false
end
`

function script(body: string): LuaScript {
  const source = SHEBANG + PRELUDE + body
  return { source, sha: createHash('sha1').update(source).digest('hex') }
}

/**
 * Batch; arguments: target length, trim threshold (trimming waits for some slack so its cost is
 * shared by many adds), heads ('' for timelines), members. Adds to each materialised (or
 * warming) list, never below its horizon, and times a materialised author list's new head.
 * Returns how many were added in all.
 */
export const ADD = script(`
local keys, args = batch()
local target, above, heads = tonumber(args[1]), tonumber(args[2]), args[3]
local total = 0
for _, k in ipairs(keys) do
  local s = state(k)
  if s then
    local ghosted = s == TRUNCATED or s == WARMING_T
    local n = 0
    for i = 4, #args do
      local m = args[i]
      if redis.call('ZADD', k, 0, m) == 1 then
        -- The ghost held rank 0; an item taking rank 0 sorts below it, in the unknown gap.
        if ghosted and redis.call('ZRANK', k, m) == 0 then
          redis.call('ZREM', k, m)
        else
          n = n + 1
        end
      end
    end
    if n > 0 then
      local items = redis.call('ZCARD', k) - 1 - (ghosted and 1 or 0)
      if items > above then trim(k, s, items, target) end
      if heads ~= '' and (s == READY or s == TRUNCATED) then
        set_head(heads, k)
      end
    end
    total = total + n
  end
end
return total
`)

/**
 * Batch; arguments: heads ('' for timelines), then 'u' (by feed uri: post field, repost field),
 * 'o' (by originator: two prefixes of the feed field) or 'm' (exact members). Returns how many
 * were removed in all. A list under rebuild is dropped instead (the rebuild is cancelled; see
 * cancel_rebuild). A materialised author list that lost members gets a new version (its head's
 * time may stay higher than its head: that only costs a read).
 */
export const REMOVE = script(`
local keys, args = batch()
local heads, how, a, b = args[1], args[2], args[3], args[4]
local n = 0
for _, k in ipairs(keys) do
  local s = state(k)
  local removed = 0
  if cancel_rebuild(k, s) then
    n = n + 1
  elseif how == 'm' then
    for i = 3, #args do removed = removed + redis.call('ZREM', k, args[i]) end
  else
    for _, m in ipairs(redis.call('ZRANGE', k, '-', '(\\127', 'BYLEX')) do
      if not is_ghost(m) then
        local f, repost = feed_field(m)
        local hit
        if how == 'u' then
          hit = f == (repost and b or a)
        else
          hit = string.sub(f, 1, #a) == a or string.sub(f, 1, #b) == b
        end
        if hit then
          redis.call('ZREM', k, m)
          removed = removed + 1
        end
      end
    end
  end
  if removed > 0 and heads ~= '' and (s == READY or s == TRUNCATED) then bump(heads, k) end
  n = n + removed
end
return n
`)

/**
 * Batch; argument: heads ('' for timelines). Drops the lists and their heads' times, cancelling
 * rebuilds under way. Returns how many existed.
 */
export const DROP = script(`
local keys, args = batch()
local heads = args[1]
local n = 0
for _, k in ipairs(keys) do
  n = n + redis.call('DEL', k)
  redis.call('DEL', lease_of(k))
  if heads ~= '' then unversion(heads, k) end
end
return n
`)

/**
 * KEYS[1] list; ARGV[1] token; ARGV[2] lease ms; ARGV[3] heads ('' for timelines). Starts a
 * rebuild unless another holds the lease (any process): takes the lease, clears the list (and its
 * head's time) and marks it WARMING, so fan-out writes are collected from here on. Returns 1 if
 * started, 0 if another rebuild holds it.
 */
export const START = script(`
local k = KEYS[1]
if redis.call('SET', lease_of(k), ARGV[1], 'NX', 'PX', ARGV[2]) == false then return 0 end
redis.call('DEL', k)
if ARGV[3] ~= '' then unversion(ARGV[3], k) end
redis.call('ZADD', k, 0, WARMING)
return 1
`)

/** KEYS[1] list; ARGV[1] token. Gives a failed rebuild's lease back and drops its list. */
export const ABANDON = script(`
local k = KEYS[1]
if redis.call('GET', lease_of(k)) ~= ARGV[1] then return 0 end
redis.call('DEL', k, lease_of(k))
return 1
`)

/**
 * KEYS[1] list; ARGV[1] target length; ARGV[2] horizon ghost or ''; ARGV[3] the rebuild's token
 * or ''; ARGV[4] heads ('' for timelines); ARGV[5..] members. Replaces the list, or merges into
 * what a WARMING list collected; keeps only what lies above the higher horizon; marks it READY
 * (or TRUNCATED); trims to the target; times an author list's head. With a token, only while
 * that rebuild still holds the lease (a removal, an eviction or an expired lease cancelled it):
 * returns 0 and writes nothing otherwise.
 */
export const MATERIALISE = script(`
local k = KEYS[1]
if ARGV[3] ~= '' then
  if redis.call('GET', lease_of(k)) ~= ARGV[3] then return 0 end
  redis.call('DEL', lease_of(k))
end
local s = state(k)
local wg = false
if s == WARMING or s == WARMING_T then
  if s == WARMING_T then wg = redis.call('ZRANGE', k, 0, 0)[1] end
  redis.call('ZREM', k, s)
else
  redis.call('DEL', k)
end
local chunk = {}
for i = 5, #ARGV do
  chunk[#chunk + 1] = 0
  chunk[#chunk + 1] = ARGV[i]
  if #chunk >= 1000 then
    redis.call('ZADD', k, unpack(chunk))
    chunk = {}
  end
end
if #chunk > 0 then redis.call('ZADD', k, unpack(chunk)) end
local hr = -1
if ARGV[2] ~= '' then
  redis.call('ZADD', k, 0, ARGV[2])
  hr = redis.call('ZRANK', k, ARGV[2])
end
if wg then hr = math.max(hr, redis.call('ZRANK', k, wg)) end
if hr > 0 then redis.call('ZREMRANGEBYRANK', k, 0, hr - 1) end
local st = hr >= 0 and TRUNCATED or READY
local items = redis.call('ZCARD', k) - (hr >= 0 and 1 or 0)
redis.call('ZADD', k, 0, st)
if items > tonumber(ARGV[1]) then trim(k, st, items, tonumber(ARGV[1])) end
if ARGV[4] ~= '' then set_head(ARGV[4], k) end
return 1
`)

/** KEYS[1] activity index; ARGV[1] cutoff ms; ARGV[2..] readers still below it are removed. */
export const FORGET = script(`
local n = 0
for i = 2, #ARGV do
  local s = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if s and tonumber(s) < tonumber(ARGV[1]) then
    n = n + redis.call('ZREM', KEYS[1], ARGV[i])
  end
end
return n
`)

/**
 * Batch, read-only; arguments: count, max, min (ZRANGE BYLEX bounds). For each list: its sentinel
 * (or ''), its lowest member (or ''), then up to count + 1 members from max down to min: one call
 * reads many lists (a celebrity merge) instead of a transaction per list.
 */
export const SLICES = script(`
local keys, args = batch()
local count, max, min = tonumber(args[1]), args[2], args[3]
local out = {}
for i, k in ipairs(keys) do
  local head = redis.call('ZRANGE', k, -1, -1)[1] or ''
  local low = redis.call('ZRANGE', k, 0, 0)[1] or ''
  local rows = redis.call('ZRANGE', k, max, min, 'BYLEX', 'REV', 'LIMIT', 0, count + 1)
  table.insert(rows, 1, low)
  table.insert(rows, 1, head)
  out[i] = rows
end
return out
`)

/**
 * Read-only; everything a home timeline page reads but the timeline's rows. KEYS[1] the reader's
 * timeline; ARGV[1] count, ARGV[2] max (ZRANGE BYLEX bound), ARGV[3] the reader's own list,
 * ARGV[4] heads (or ''), ARGV[5] how many celebrities (n), ARGV[6..5+n] the followed celebrities'
 * lists, then optionally n versions: the caller's copies (see below). The caller sends it in one
 * transaction (MULTI) after a plain ZRANGE of the timeline's up to count + 1 rows from max down:
 * Redis answers that range straight from the sorted set, where a script would make every member,
 * and the reply holding them, a Lua string, hashing its bytes (most of a read's time in Redis
 * went to making strings).
 *
 * The reply is one string (one bulk reply to parse, not three per list): the lists joined by
 * \x1d, each as sentinel (or ''), \x1e, horizon, \x1e, then up to count + 1 members from max
 * down joined by '\n' (members hold none of these); the timeline's part has no members. The
 * celebrities' lists are read only when the timeline is materialised, and only down to the
 * timeline's count-th member from max when it is an item (the ghost is a list's lowest member,
 * so those above it are items too): nothing older can make the merged page. The reader's own
 * list is read down to the same floor when there are celebrities (a page's merge admits no own
 * item below count followed ones), and whole otherwise: a Cluster store, composing the read,
 * would need a round trip more to know the floor first. A celebrity list whose head is timed
 * below that floor is not read at all (one HMGET for all of them instead of a range each; most
 * lists a page passes over end there) and answers as materialised and empty, which is what its
 * range would have held; only if every such list still exists (the heads do not see keys Redis
 * evicts or an operator deletes).
 *
 * The horizon is the list's ghost when it has one and it can matter, else ''. A first page (max
 * is the top) reads each list in one range from '+' (the timeline's, beside the script); its
 * ghost is then in the range (its last row) or below the range's low end, where it cannot cut
 * the page. A later page reads the sentinel and the ghost on
 * their own, as a ghost above the cursor leaves the range empty. Every call a list needs less
 * counts: Redis spends most of a read here.
 *
 * Copies: with versions given (a first page, with heads), the caller holds copies of some
 * celebrity lists' tops ('' for none). A list whose version still is the copy's answers \x1f
 * alone (and must still exist, as above); every other list not passed over is read whole (its
 * top count + 2 rows, not down to the floor: the caller keeps it as its new copy) and answers
 * sentinel (or ''), \x1e, version (or '': not materialised, or written before versions were
 * kept), \x1e, its rows below the sentinel; a passed-over list answers as materialised, without a
 * version, and empty. The caller cuts each to the floor itself.
 */
export const HOME = script(`
local count, max = tonumber(ARGV[1]), ARGV[2]
local first = max == '(\\127'
local NO_ROWS = {}
-- Limits as strings: a number passed to redis.call is formatted (sprintf) on every call.
local upto1, upto2 = tostring(count + 1), tostring(count + 2)
-- The reply's pieces, one table for all lists: joined once at the end, not list by list (a
-- string per list cost a celebrity merge 8 % of the call).
local out = {}
local function reply()
  out[#out] = nil
  return table.concat(out)
end
-- One list's part of the reply: sentinel, horizon, then its rows from index from on.
-- Rows go into the reply's table one by one: joining them per list first would make (and hash)
-- every member's bytes once more, and Redis spends much of a read making strings.
local function put(s, low, rows, from)
  local o = #out
  out[o + 1], out[o + 2], out[o + 3], out[o + 4] = s, '\\30', low, '\\30'
  o = o + 4
  for i = from, #rows do
    out[o + 1], out[o + 2] = rows[i], '\\n'
    o = o + 2
  end
  if #rows >= from then o = o - 1 end
  out[o + 1] = '\\29'
end
local function read(k, min)
  local rows, s, from
  if first then
    rows = redis.call('ZRANGE', k, '+', min, 'BYLEX', 'REV', 'LIMIT', '0', upto2)
    s = rows[1]
    if s and GHOSTED[s] then from = 2 else s, from = '', 1 end
  else
    rows = redis.call('ZRANGE', k, max, min, 'BYLEX', 'REV', 'LIMIT', '0', upto1)
    s, from = redis.call('ZRANGE', k, '-1', '-1')[1] or '', 1
  end
  local low = ''
  if s == TRUNCATED or s == WARMING_T then
    local last = rows[#rows]
    if #rows >= from and is_ghost(last) then
      low = last
    elseif not first then
      low = redis.call('ZRANGE', k, '0', '0')[1] or ''
    end
  end
  put(s, low, rows, from)
  return rows, s, from
end
-- The timeline: its state and horizon only; its rows come from the ZRANGE beside this call.
local tk = KEYS[1]
local s = redis.call('ZRANGE', tk, '-1', '-1')[1]
if not (s and GHOSTED[s]) then s = '' end
local ready = s == READY or s == TRUNCATED
-- A first page's horizon is in its rows when it can matter (the caller takes it from there).
local low = ''
if not first and (s == TRUNCATED or s == WARMING_T) then
  low = redis.call('ZRANGE', tk, '0', '0')[1] or ''
end
put(s, low, NO_ROWS, 1)
-- The floor: the page's count-th row when it is an item. The ghost is a list's lowest member,
-- so when the count-th row is an item, so are those above it.
local min = '-'
if ready and count > 0 then
  local m = redis.call('ZRANGE', tk, max, '-', 'BYLEX', 'REV', 'LIMIT', tostring(count - 1), '1')[1]
  if m and not is_ghost(m) then min = '[' .. m end
end
local n = tonumber(ARGV[5])
local c1, cn = 6, 5 + n
-- The own list down to the same floor when there are celebrities to read with it.
read(ARGV[3], n > 0 and min or '-')
if not ready then return reply() end
local heads, passed, copied, versions = ARGV[4], {}, {}, {}
local copies = first and heads ~= '' and #ARGV == cn + n
local floor = min ~= '-' and heads ~= '' and n > 0 and time_of(string.sub(min, 2))
if floor then floor = tonumber(floor) end
if floor or copies then
  -- In chunks: unpack has a stack limit, and a reader may follow thousands of celebrities.
  local present = true
  for c = c1, cn, 1000 do
    local last = math.min(cn, c + 999)
    local keys = {}
    if floor then
      local times = redis.call('HMGET', heads, unpack(ARGV, c, last))
      for i = c, last do
        local t = times[i - c + 1]
        if t and tonumber(t) < floor then
          passed[i] = true
          keys[#keys + 1] = ARGV[i]
        end
      end
    end
    if copies then
      local vs = redis.call('HMGET', heads .. ':v', unpack(ARGV, c, last))
      for i = c, last do
        local v = vs[i - c + 1]
        if v and not passed[i] then
          versions[i] = v
          if v == ARGV[i + n] then
            copied[i] = true
            keys[#keys + 1] = ARGV[i]
          end
        end
      end
    end
    if #keys > 0 and redis.call('EXISTS', unpack(keys)) ~= #keys then present = false end
  end
  if not present then passed, copied = {}, {} end
end
for i = c1, cn do
  if passed[i] then
    put(READY, '', NO_ROWS, 1)
  elseif copied[i] then
    out[#out + 1] = '\\31'
    out[#out + 1] = '\\29'
  elseif copies then
    local rows = redis.call('ZRANGE', ARGV[i], '+', '-', 'BYLEX', 'REV', 'LIMIT', '0', upto2)
    local s = rows[1]
    if s and GHOSTED[s] then
      put(s, (s == READY or s == TRUNCATED) and versions[i] or '', rows, 2)
    else
      put('', '', NO_ROWS, 1)
    end
  else
    read(ARGV[i], min)
  end
end
return reply()
`)
