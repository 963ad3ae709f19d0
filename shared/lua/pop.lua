-- pop.lua: a worker takes a batch into the set of entries it holds.
-- KEYS[1]  queue       LIST  entries waiting
-- KEYS[2]  suspects    LIST  groups of reclaimed entries ("e1 e2 ..."), see reclaim.lua; a group
--                            is taken alone, as one batch, before anything from the queue
-- KEYS[3]  processing  SET   entries this worker holds
-- KEYS[4]  landing     LIST  where this worker's blocking BLMOVE delivered (held, too)
-- ARGV[1]  how many entries at most (0: only move what landed, e.g. at shutdown)
-- ARGV[2]  1: take no reclaimed group (the caller is filling a batch it has begun elsewhere,
--          another partition of the workload: a group must stay alone in its batch)
-- Returns  {suspect (1 if this is a reclaimed group), {entries...}, groups still waiting}
local limit = tonumber(ARGV[1])
local taken = redis.call('LRANGE', KEYS[4], 0, -1)
if #taken > 0 then redis.call('DEL', KEYS[4]) end
local suspect = 0
if #taken == 0 and limit > 0 and ARGV[2] ~= '1' then
  local group = redis.call('LPOP', KEYS[2])
  if group then
    for entry in string.gmatch(group, '%S+') do taken[#taken + 1] = entry end
    suspect = 1
  end
end
if suspect == 0 and #taken < limit then
  local more = redis.call('LPOP', KEYS[1], limit - #taken)
  if more then
    for _, entry in ipairs(more) do taken[#taken + 1] = entry end
  end
end
if #taken > 0 then chunked('SADD', KEYS[3], taken) end
return {suspect, taken, redis.call('LLEN', KEYS[2])}
