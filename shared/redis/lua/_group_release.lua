-- _group_release.lua (included by take_grouped.lua, ack.lua, orphans.lua and reclaim.lua): what
-- leaves a worker gives its group's room back.

-- Entries leave a worker (acknowledged, given back, quarantined, released as orphans): each
-- gives its group's room back (group_max_in_flight), and a group held back at that limit rejoins
-- the ring. Entries a group did not give (none of a workload without groups) are skipped.
-- ended (take_grouped.lua): checks over, entries still held: room back now, g.of keeps
-- '~'..group (an ack then only forgets it; a give-back still finds the group's list).
local function group_release(g, entries, ended)
  if #entries == 0 or redis.call('EXISTS', g.of) == 0 then return end
  local counts, names = {}, {}
  for start = 1, #entries, CHUNK do
    local part = {unpack(entries, start, math.min(start + CHUNK - 1, #entries))}
    local found = redis.call('HMGET', g.of, unpack(part))
    local gone, marked = {}, {}
    for k, name in ipairs(found) do
      local counted = name and byte(name, 1) ~= TILDE
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
