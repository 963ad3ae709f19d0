-- groupfloor.lua: the least Redis work of a grouped push, take and acknowledgement with fair
-- turns, exact per-group limits and the fenced ack, in the cheapest structure conceived so far;
-- for bench/rediscost/groupab.py to time beside the real scripts (its "floor" line). Not a design
-- recheck runs: it answers whether any structure could reach a given share of today's cost.
-- Every waiting entry in one sorted set, as "id:due_ms:group" scored by its group's turn (a take
-- is one pop whatever the groups; the entry carries its group to the worker and back, so nothing
-- maps entries to groups); each group a take gives entries from has its tokens and its running
-- count read and written, and the ack lowers the count again; the ack releases only the ids still
-- in flight for their due time (the fence) and counts them. The push admits only ids not in
-- flight (the dedup), and scores each group's new entries from its next turn (KEYS[7]), or from
-- the turn the take has reached if that is later: a group's entries are served one per round of
-- the groups, and a group that comes back does not jump ahead of the others.
-- Left out, each of which a whole design adds: a group over its limits (its entries set aside and
-- put back in its turn later), dropped entries, forgetting the turns of groups gone, the groups'
-- breaker, priority within a group, weights, wake-ups, the waiting count, completions recorded
-- for guarded passes, forgetting tokens that have passed, the lease and the epoch at the push.
-- KEYS[1] waiting ZSET, KEYS[2] tokens HASH group -> arrival (us of the Redis clock),
-- KEYS[3] running HASH group -> checks running, KEYS[4] the worker's SET, KEYS[5] inflight HASH
-- id -> due_ms, KEYS[6] stats HASH, KEYS[7] turns HASH group -> its next turn
-- ARGV[1] 'take' and ARGV[2] how many; 'ack' and ARGV[2..] every entry the worker holds; or
-- 'push', ARGV[2] the turns' scale (a turn t scores t x scale + the entry's place in the push)
-- and ARGV[3..] the entries
-- Returns the entries taken ("id:due_ms:group"), how many were still in flight, or how many
-- were pushed.
-- Standalone on purpose, as groupzset.lua (not prefixed with _lib.lua): its ack restates what
-- _group_release.lua and groupzset.lua's ack do with the running counts, so that it measures
-- only itself.
local find, sub = string.find, string.sub

-- Each entry's group, tallied: the distinct groups in order, and how many entries each.
local function tally(entries)
  local order, count = {}, {}
  for _, entry in ipairs(entries) do
    local first = find(entry, ':', 1, true)
    local name = sub(entry, find(entry, ':', first + 1, true) + 1)
    if not count[name] then
      count[name] = 0
      order[#order + 1] = name
    end
    count[name] = count[name] + 1
  end
  return order, count
end

-- The entries' ids and due times, in order.
local function ids_and_dues(entries)
  local ids, dues = {}, {}
  for i, entry in ipairs(entries) do
    local first = find(entry, ':', 1, true)
    ids[i] = sub(entry, 1, first - 1)
    dues[i] = sub(entry, first + 1, find(entry, ':', first + 1, true) - 1)
  end
  return ids, dues
end

if ARGV[1] == 'push' then
  local scale, entries = tonumber(ARGV[2]), {unpack(ARGV, 3)}
  local ids, dues = ids_and_dues(entries)
  local held, fresh, pairs_ = redis.call('HMGET', KEYS[5], unpack(ids)), {}, {}
  for i, entry in ipairs(entries) do
    if not held[i] then
      fresh[#fresh + 1] = entry
      pairs_[#pairs_ + 1] = ids[i]
      pairs_[#pairs_ + 1] = dues[i]
    end
  end
  if #fresh == 0 then return 0 end
  redis.call('HSET', KEYS[5], unpack(pairs_))
  local order = tally(fresh)
  local turns, head = redis.call('HMGET', KEYS[7], unpack(order)), redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  local reached = head[2] and math.floor(tonumber(head[2]) / scale) or 0
  local next_turn = {}
  for i, name in ipairs(order) do next_turn[name] = math.max(tonumber(turns[i]) or 0, reached) end
  local scored = {}
  for i, entry in ipairs(fresh) do
    local first = find(entry, ':', 1, true)
    local name = sub(entry, find(entry, ':', first + 1, true) + 1)
    scored[#scored + 1] = next_turn[name] * scale + i
    scored[#scored + 1] = entry
    next_turn[name] = next_turn[name] + 1
  end
  redis.call('ZADD', KEYS[1], unpack(scored))
  local written = {}
  for _, name in ipairs(order) do
    written[#written + 1] = name
    written[#written + 1] = next_turn[name]
  end
  redis.call('HSET', KEYS[7], unpack(written))
  redis.call('HINCRBY', KEYS[6], 'dispatched', #fresh)
  return #fresh
end

if ARGV[1] == 'take' then
  local popped = redis.call('ZPOPMIN', KEYS[1], tonumber(ARGV[2]))
  local entries = {}
  for i = 1, #popped, 2 do entries[#entries + 1] = popped[i] end
  if #entries == 0 then return {} end
  local order, count = tally(entries)
  local tokens = redis.call('HMGET', KEYS[2], unpack(order))
  local running = redis.call('HMGET', KEYS[3], unpack(order))
  local new_tokens, new_running = {}, {}
  for i, name in ipairs(order) do
    new_tokens[#new_tokens + 1] = name
    new_tokens[#new_tokens + 1] = (tonumber(tokens[i]) or 0) + count[name] * 1000  -- (1,000/s)
    new_running[#new_running + 1] = name
    new_running[#new_running + 1] = (tonumber(running[i]) or 0) + count[name]
  end
  redis.call('HSET', KEYS[2], unpack(new_tokens))
  redis.call('HSET', KEYS[3], unpack(new_running))
  redis.call('SADD', KEYS[4], unpack(entries))
  return entries
end

local entries = {unpack(ARGV, 2)}
if #entries == 0 then return 0 end
redis.call('DEL', KEYS[4])  -- a batch worker's ack of everything it holds, as recheck's fast path
local ids, dues = ids_and_dues(entries)
local current, released = redis.call('HMGET', KEYS[5], unpack(ids)), {}
for i, id in ipairs(ids) do
  if current[i] == dues[i] then released[#released + 1] = id end
end
if #released > 0 then redis.call('HDEL', KEYS[5], unpack(released)) end
local order, count = tally(entries)
local running = redis.call('HMGET', KEYS[3], unpack(order))
local still, idle = {}, {}
for i, name in ipairs(order) do
  local left = (tonumber(running[i]) or 0) - count[name]
  if left > 0 then
    still[#still + 1] = name
    still[#still + 1] = left
  else
    idle[#idle + 1] = name
  end
end
if #still > 0 then redis.call('HSET', KEYS[3], unpack(still)) end
if #idle > 0 then redis.call('HDEL', KEYS[3], unpack(idle)) end
redis.call('HINCRBY', KEYS[6], 'checked', #released)
return #released
