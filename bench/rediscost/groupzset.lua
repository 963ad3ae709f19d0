-- groupzset.lua: a PROTOTYPE of another structure for grouped takes, for `recheck bench --mode
-- groups` to measure beside recheck's (its "one zset" column); not what recheck runs.
-- All of a grouped workload's waiting entries in one sorted set, members "id:due_ms:group",
-- scored by their group's turn (a group's k-th entry at k: ZPOPMIN then serves groups in turn),
-- so a take is one pop whatever the groups; each group's tokens and running count are still
-- read and written once per take (and the count at the ack), as exact limits need.
-- Left out, so it costs less than a whole design would: entries over a group's limits (they
-- would be parked and scored again), dropped entries, the dispatcher's side (the turn a group's
-- new entries get), the waiting count and the workers' wake-ups.
-- KEYS[1] waiting ZSET, KEYS[2] tokens HASH, KEYS[3] running HASH, KEYS[4] the worker's SET,
-- KEYS[5] of HASH (entry -> group, for the ack)
-- ARGV[1] 'take' and ARGV[2] how many; or 'ack' and ARGV[2..] the entries
-- Returns the entries taken, or how many were acknowledged.
-- Standalone on purpose (not prefixed with _lib.lua): its ack restates what _lib.lua's
-- group_release does with the running counts, so that the prototype measures only itself.
local function tally(names)  -- the distinct groups in order, and how many entries each
  local order, count = {}, {}
  for _, name in ipairs(names) do
    if not count[name] then
      count[name] = 0
      order[#order + 1] = name
    end
    count[name] = count[name] + 1
  end
  return order, count
end

if ARGV[1] == 'take' then
  local popped = redis.call('ZPOPMIN', KEYS[1], tonumber(ARGV[2]))
  local entries, names = {}, {}
  for i = 1, #popped, 2 do
    local member = popped[i]
    local last = string.find(member, ':', string.find(member, ':', 1, true) + 1, true)
    entries[#entries + 1] = string.sub(member, 1, last - 1)
    names[#names + 1] = string.sub(member, last + 1)
  end
  if #entries == 0 then return {} end
  local order, count = tally(names)
  local tokens = redis.call('HMGET', KEYS[2], unpack(order))
  local running = redis.call('HMGET', KEYS[3], unpack(order))
  local new_tokens, new_running = {}, {}
  for i, name in ipairs(order) do
    new_tokens[#new_tokens + 1] = name
    new_tokens[#new_tokens + 1] = (tonumber(tokens[i]) or 0) + count[name]
    new_running[#new_running + 1] = name
    new_running[#new_running + 1] = (tonumber(running[i]) or 0) + count[name]
  end
  redis.call('HSET', KEYS[2], unpack(new_tokens))
  redis.call('HSET', KEYS[3], unpack(new_running))
  local of = {}
  for i, entry in ipairs(entries) do
    of[#of + 1] = entry
    of[#of + 1] = names[i]
  end
  redis.call('HSET', KEYS[5], unpack(of))
  redis.call('SADD', KEYS[4], unpack(entries))
  return entries
end

local entries = {unpack(ARGV, 2)}
if #entries == 0 then return 0 end
redis.call('SREM', KEYS[4], unpack(entries))
local names = redis.call('HMGET', KEYS[5], unpack(entries))
redis.call('HDEL', KEYS[5], unpack(entries))
local order, count = tally(names)
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
return #entries
