-- _group_rounds.lua (included by pop.lua, for _take_groups.lua): what a round of visits to the
-- groups writes once, and the sweep of the groups' arrival times.

-- Where each group of a round waits now: the unvisited first in the ring, then as decided.
local function place_groups(names, visited, again, full, sleeping)
  local unvisited = {}  -- first next time, in their order
  for i = #names, visited + 1, -1 do unvisited[#unvisited + 1] = names[i] end
  if #unvisited > 0 then chunked('LPUSH', G.ring, unvisited) end
  if #full > 0 then chunked('SADD', G.full, full) end
  if #sleeping > 0 then chunked('ZADD', G.sleeping, sleeping) end
  if #again > 0 then chunked('RPUSH', G.ring, again) end
end

-- The sweep of K.group_rates: about as many fields as groups visited, those whose time passed.
local function sweep_rates(gnow, gahead, visited_all)
  local rates = K.group_rates
  local cursor = redis.call('HGET', rates, '~cursor') or '0'
  local scan = redis.call('HSCAN', rates, cursor, 'COUNT', visited_all)
  local past = {}
  for i = 1, #scan[2], 2 do
    local field, value = scan[2][i], tonumber(scan[2][i + 1])
    -- (the fields '~' and '~cursor' are no group's: _lib.lua HASHTABLE, the cursor)
    if value and value < gnow and string.sub(field, 1, 1) ~= '~' then past[#past + 1] = field end
  end
  if #past > 0 then chunked('HDEL', rates, past) end
  redis.call('HSET', rates, '~cursor', scan[1])
  -- No time stored runs more than gahead past the take that wrote it (a visit takes at most
  -- the tokens it has): once that has passed with no take writing, the hash means nothing.
  redis.call('PEXPIRE', rates, math.ceil(gahead / 1000) + 1000)
end
