-- errors.lua: count a batch's failures by error, for status and the dashboard (no table scan).
-- KEYS[1]  errors  HASH  normalised message -> cjson {count, first, last, examples}
-- KEYS[2]  seen    ZSET  normalised message -> when it was last seen (the eviction order)
-- ARGV[1]  now (Unix seconds, on the database clock: every worker stamps on the same clock)
-- ARGV[2]  most groups kept; when full, the group seen least recently makes room and its count
--          goes to "(other errors)", so a new error always shows, whatever filled the groups
-- ARGV[3]  most example ids kept per group (the latest, each once)
-- ARGV[4..] groups, three values each: message, how many failed, example ids (a JSON array)
-- Returns  nothing. Groups not seen for a day are pruned by the orphans job (store.prune_errors).
local OTHER = '(other errors)'
local now, most, examples_kept = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])

local function read(message)
  local raw = redis.call('HGET', KEYS[1], message)
  return raw and cjson.decode(raw) or nil
end

local function add(message, count, examples, first)
  local group = read(message) or {count = 0, first = first or now, examples = {}}
  group.count = group.count + count
  group.last = now
  for _, example in ipairs(examples) do
    for k = #group.examples, 1, -1 do  -- an id seen again moves to the end: each shown once
      if tostring(group.examples[k]) == tostring(example) then table.remove(group.examples, k) end
    end
    table.insert(group.examples, example)
  end
  while #group.examples > examples_kept do table.remove(group.examples, 1) end
  redis.call('HSET', KEYS[1], message, cjson.encode(group))
  redis.call('ZADD', KEYS[2], now, message)
end

for i = 4, #ARGV, 3 do
  local message, count = ARGV[i], tonumber(ARGV[i + 1])
  if redis.call('HEXISTS', KEYS[1], message) == 0 and redis.call('HLEN', KEYS[1]) >= most then
    -- Full: the least recently seen group (never the catch-all) makes room.
    local oldest = redis.call('ZRANGE', KEYS[2], 0, 1)
    local victim = oldest[1] == OTHER and oldest[2] or oldest[1]
    if victim then
      local evicted = read(victim)
      redis.call('HDEL', KEYS[1], victim)
      redis.call('ZREM', KEYS[2], victim)
      if evicted then add(OTHER, evicted.count, {}, evicted.first) end
    end
  end
  add(message, count, cjson.decode(ARGV[i + 2]))
end
return 0
