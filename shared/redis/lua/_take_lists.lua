-- _take_lists.lua (included by pop.lua): a reclaimed group, else the priority and plain queues.

-- Appends up to n entries of a list to taken; returns taken (a new table if it was empty).
local function pop_into(taken, list, n)
  if n <= 0 then return taken end
  local more = redis.call('LPOP', list, n)
  if not more then return taken end
  if #taken == 0 then return more end
  local count = #taken
  for i = 1, #more do taken[count + i] = more[i] end
  return taken
end

-- taken: what landed; allowed: how many more the grant allows. A reclaimed group (the entries a
-- dead worker held, see reclaim.lua) is taken alone, as one batch, before anything from the
-- queues, unless the caller is filling a batch it has begun in another partition (A.no_group).
-- The priority list is read whatever A.priority_share says: entries left there by a
-- configuration that had a priority column (or a dispatcher that has one before its workers
-- do) are taken, first. While both lists wait, A.priority_share of the entries come from the
-- plain queue all the same (the fraction carried over between takes in K.turns, so a take of
-- one entry also gives the rest its turn); either list's shortfall is filled from the other.
-- Returns taken, and 1 if it is a reclaimed group, else 0.
local function take_lists(taken, allowed)
  if #taken == 0 and allowed > 0 and not A.no_group then
    local group = redis.call('LPOP', K.suspects)
    if group then
      for entry in string.gmatch(group, '%S+') do taken[#taken + 1] = entry end
      return taken, 1
    end
  end
  local first = allowed > 0 and redis.call('LLEN', K.priority) or 0
  if first == 0 then return pop_into(taken, K.queue, allowed), 0 end
  local rest, for_rest = redis.call('LLEN', K.queue), 0
  if rest > 0 then
    local owed = tonumber(redis.call('GET', K.turns) or 0) + allowed * (tonumber(A.priority_share) or 0)
    for_rest = math.min(math.floor(owed), allowed, rest)
    redis.call('SET', K.turns, string.format('%.6f', owed - math.floor(owed)), 'PX', 600000)
  end
  local from_first = math.min(first, allowed - for_rest)
  taken = pop_into(taken, K.priority, from_first)
  return pop_into(taken, K.queue, math.min(rest, allowed - from_first)), 0
end
