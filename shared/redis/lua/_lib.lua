-- _lib.lua: helpers prepended to every recheck script by shared/redis/store.py.
-- Entries are "id:due_ms" strings; unpack() is limited by Lua's C stack, so multi-argument
-- commands are sent in chunks.

local CHUNK = 1000
local find, sub = string.find, string.sub  -- locals: a global's lookup per call costs

local function id_of(entry)
  local colon = find(entry, ':', 1, true)
  if not colon then return nil end
  return sub(entry, 1, colon - 1)
end

-- redis.call(command, key, prefix..., items...) in chunks; returns the replies in order.
local function chunked(command, key, items, prefix)
  local replies, n = {}, #items
  for start = 1, n, CHUNK do
    local stop = math.min(start + CHUNK - 1, n)
    if prefix then
      local args = {}
      for _, p in ipairs(prefix) do args[#args + 1] = p end
      for i = start, stop do args[#args + 1] = items[i] end
      replies[#replies + 1] = redis.call(command, key, unpack(args))
    else
      replies[#replies + 1] = redis.call(command, key, unpack(items, start, stop))
    end
  end
  return replies
end

-- Completions recorded for guarded passes (ack.lua, read by dispatch.lua) go to one hash per
-- COMPLETED_WINDOW_S of the Redis clock (the one clock both scripts share, whatever the hosts'),
-- named prefix:<unix seconds // window>. A pass's read and its push are less than a window
-- apart (a guard's TTL, 10 s, outlives any page), so a push looks in the window of its own time
-- and the one before. Each hash expires at a fixed time, the end of the window after next (20-30
-- s after each record): records made while a guard is renewed without end (a one-shot
-- dispatcher's look-back) do not keep the older ones alive.
local COMPLETED_WINDOW_S = 10

-- Returns this window's hash, the one before, and when this window's hash expires (Unix ms).
-- now_us: a test's clock, in microseconds; '' (always, in production): the Redis clock.
local function completed_windows(prefix, now_us)
  local seconds = now_us ~= '' and math.floor(tonumber(now_us) / 1000000) or tonumber(redis.call('TIME')[1])
  local window = math.floor(seconds / COMPLETED_WINDOW_S)
  return prefix .. ':' .. window, prefix .. ':' .. (window - 1), (window + 3) * COMPLETED_WINDOW_S * 1000
end

-- Groups (group_column, docs/groups.md): the block of ten keys a script names from KEYS[first]
-- on, in the order shared/redis/keys.py `Keys.group_keys` gives them:
--   prefix   the group lists' common prefix: LIST prefix..hex holds a group's waiting entries
--            (their rate limits' arrival times are pop.lua's KEYS[24], a hash); with priority,
--            LIST prefix..'!'..hex holds its priority rows' entries, taken first (_group_push.lua)
--   ring     LIST  groups with entries waiting that their limits let go, in turn (round robin)
--   sleeping ZSET  groups held back by their rate -> ms when their next token is due
--   full     SET   groups held back by group_max_in_flight: an ack giving room moves them back
--   running  HASH  group -> checks running (only with group_max_in_flight)
--   of       HASH  entry -> group of each entry a take gave a worker (~group: its room given back)
--   waiting  STRING entries waiting in all the group lists (the dispatcher's backpressure)
--   wake     LIST  "~" tokens: idle workers of a grouped workload block on it, not the queue
--   urgent   SET   groups whose priority list holds entries; urgent_waiting STRING: how many
-- Invariant: a group's lists are not both empty exactly while the group is in one of ring,
-- sleeping, full; every script that fills a group's lists from empty puts it in the ring.
local function group_keys(first)
  return {prefix = KEYS[first], ring = KEYS[first + 1], sleeping = KEYS[first + 2],
          full = KEYS[first + 3], running = KEYS[first + 4], of = KEYS[first + 5],
          waiting = KEYS[first + 6], wake = KEYS[first + 7], urgent = KEYS[first + 8],
          urgent_waiting = KEYS[first + 9]}
end

-- A group's priority list (keys.py Keys.group_urgent_list): hex names never hold '!'.
local function urgent_list(g, name) return g.prefix .. '!' .. name end

-- A field whose value is longer than hash-max-listpack-value (64 by default), written with the
-- fields of groups:of, groups:running and groups:rates: Redis then keeps those hashes as hash
-- tables from the first write. As listpacks (up to hash-max-listpack-entries: 512 on Debian's
-- Redis 7.0) every field written is a scan of the others: one take's HSET of 500 fields cost
-- 3 ms, not 0.1.
local HASHTABLE = {'~', string.rep('~', 80)}

-- One idle worker is woken (at most one token waits: a woken worker that finds more work wakes
-- the next itself, pop.lua).
local function group_wake(g)
  if redis.call('LLEN', g.wake) == 0 then redis.call('RPUSH', g.wake, '~') end
end

-- Entries leave a worker (acknowledged, given back, quarantined, released as orphans): each
-- gives its group's room back (group_max_in_flight), and a group held back at that limit rejoins
-- the ring. Entries a group did not give (none of a workload without groups) are skipped.
-- ended (pop.lua): checks over, entries still held: room back now, g.of keeps '~'..group (an
-- ack then only forgets it; a give-back still finds the group's list).
local function group_release(g, entries, ended)
  if #entries == 0 or redis.call('EXISTS', g.of) == 0 then return end
  local counts, names = {}, {}
  for start = 1, #entries, CHUNK do
    local part = {unpack(entries, start, math.min(start + CHUNK - 1, #entries))}
    local found = redis.call('HMGET', g.of, unpack(part))
    local gone, marked = {}, {}
    for k, name in ipairs(found) do
      local counted = name and sub(name, 1, 1) ~= '~'
      if name and not ended then gone[#gone + 1] = part[k] end
      if counted and ended then
        marked[#marked + 1] = part[k]
        marked[#marked + 1] = '~' .. name
      end
      if counted then
        if not counts[name] then
          counts[name] = 0
          names[#names + 1] = name
        end
        counts[name] = counts[name] + 1
      end
    end
    if #gone > 0 then redis.call('HDEL', g.of, unpack(gone)) end
    if #marked > 0 then redis.call('HSET', g.of, unpack(marked)) end
  end
  if #names == 0 or redis.call('EXISTS', g.running) == 0 then return end  -- no group_max_in_flight
  local still, idle, at = {}, {}, 0
  for _, reply in ipairs(chunked('HMGET', g.running, names)) do
    for _, value in ipairs(reply) do
      at = at + 1
      local name = names[at]
      local left = (tonumber(value) or 0) - counts[name]
      if left > 0 then
        still[#still + 1] = name
        still[#still + 1] = left
      else
        idle[#idle + 1] = name
      end
    end
  end
  if #still > 0 then chunked('HSET', g.running, still, HASHTABLE) end
  if #idle > 0 then chunked('HDEL', g.running, idle) end
  if redis.call('SCARD', g.full) == 0 then return end  -- usually: no group at its limit
  local freed, at = {}, 0
  for _, flags in ipairs(chunked('SMISMEMBER', g.full, names)) do
    for _, flag in ipairs(flags) do
      at = at + 1
      if flag == 1 then freed[#freed + 1] = names[at] end
    end
  end
  if #freed > 0 then
    chunked('SREM', g.full, freed)
    chunked('RPUSH', g.ring, freed)
    group_wake(g)
  end
end
