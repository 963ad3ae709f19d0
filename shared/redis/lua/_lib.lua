-- _lib.lua: helpers prepended to every recheck script by shared/redis/store.py.
-- Entries are "id:due_ms" strings; unpack() is limited by Lua's C stack, so multi-argument
-- commands are sent in chunks.

local CHUNK = 1000
local find, sub, byte = string.find, string.sub, string.byte  -- locals: a global's lookup per call costs
local TILDE = 126  -- byte('~')

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

-- Groups (group_column, docs/groups.md): the block of GROUP_KEYS keys a script names from
-- KEYS[first] on, in the order shared/redis/keys.py `Keys.group_keys` gives them:
--   prefix   the group lists' common prefix: LIST prefix..hex holds a group's waiting entries
--            (their rate limits' arrival times: take_grouped.lua's K.group_rates, a hash); with priority,
--            LIST prefix..'!'..hex holds its priority rows' entries, taken first (_group_push.lua)
--   ring     LIST  groups with entries waiting that their limits let go, in turn (round robin)
--   sleeping ZSET  groups held back by their rate -> ms when their next token is due
--   full     SET   groups held back by group_max_in_flight: an ack giving room moves them back
--   running  HASH  group -> checks running (only with group_max_in_flight)
--   of       HASH  entry -> group of each entry a take gave a worker (~group: its room given back)
--   waiting  STRING entries waiting in all the group lists (the dispatcher's backpressure)
--   wake     LIST  "~" tokens: idle workers block on it (every workload, grouped or not), not on
--            the queue: a page wakes one worker, not all of them (group_wake)
--   urgent   SET   groups whose priority list holds entries; urgent_waiting STRING: how many
--   open     HASH  group -> "next probe ms:open ms:probe entry" of a group its breaker opened
--   failing  HASH  group -> its checks that failed in a row (_group_breaker.lua)
--   limits   HASH  group -> "rate:in flight:weight" of groups with limits of their own
--   cut      STRING "fraction of its share left:group" of the group whose turn a take cut short
-- Invariant: a group's lists are not both empty exactly while the group is in one of ring,
-- sleeping, full; every script that fills a group's lists from empty puts it in the ring.
local GROUP_KEYS = 14
local function group_keys(first)
  return {prefix = KEYS[first], ring = KEYS[first + 1], sleeping = KEYS[first + 2],
          full = KEYS[first + 3], running = KEYS[first + 4], of = KEYS[first + 5],
          waiting = KEYS[first + 6], wake = KEYS[first + 7], urgent = KEYS[first + 8],
          urgent_waiting = KEYS[first + 9], open = KEYS[first + 10], failing = KEYS[first + 11],
          limits = KEYS[first + 12], cut = KEYS[first + 13]}
end

-- One reply per name, of one command per CHUNK names (HMGET's values, SMISMEMBER's flags).
local function per_name(command, key, names)
  local values = {}
  for _, reply in ipairs(chunked(command, key, names)) do
    for _, value in ipairs(reply) do values[#values + 1] = value end
  end
  return values
end

-- Milliseconds of the clock a script is given (microseconds, as text; '' in production: Redis').
local function clock_ms(now_us)
  if now_us ~= '' then return math.floor(tonumber(now_us) / 1000) end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- A group's G.open value "next probe ms:open ms:probe entry" (_group_breaker.lua), split.
local function split_open(value)
  local a = find(value, ':', 1, true)
  local b = find(value, ':', a + 1, true)
  return tonumber(sub(value, 1, a - 1)), tonumber(sub(value, a + 1, b - 1)), sub(value, b + 1)
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
-- the next itself, _take_grant.lua finish). Any workload: a blocking move on the queue woke every
-- idle worker for each page (each then took a sliver of it, every take a full cycle of round trips).
local function wake_one(wake)
  if redis.call('LLEN', wake) == 0 then redis.call('RPUSH', wake, '~') end
end
local function group_wake(g) wake_one(g.wake) end
