-- take_priority.lua: a worker's take of a workload with a priority column (docs/priorities.md):
-- the priority rows' list first; while both lists wait, `priority_share` of each take's entries
-- come from the rest's all the same (the fraction carried over between takes in K.turns, so a
-- take of one entry also gives the rest its turn); either list's shortfall is filled from the
-- other. Within the workload's limits.
-- KEYS[1..11], ARGV[1..9] and the reply: _take.lua
-- KEYS[12] queue     LIST    the rest's entries waiting, the oldest due first (dispatch.lua)
-- KEYS[13] priority  LIST    the priority rows' entries, taken first
-- KEYS[14] turns     STRING  the rest's share of takes not handed out yet (a fraction of one)
-- ARGV[10] priority_share: the rest's share of a take while both lists wait (0: strict priority)
-- #include _take
K.queue, K.priority, K.turns = KEYS[12], KEYS[13], KEYS[14]
A.share = tonumber(ARGV[10]) or 0
-- #include _take_grant
-- #include _take_lists
-- #include _take_drops

-- Up to `allowed` entries from the two lists, as the header says.
local function take_both(allowed)
  local first = allowed > 0 and redis.call('LLEN', K.priority) or 0
  if first == 0 then return pop_into({}, K.queue, allowed) end
  local rest, for_rest = redis.call('LLEN', K.queue), 0
  if rest > 0 then
    local owed = tonumber(redis.call('GET', K.turns) or 0) + allowed * A.share
    for_rest = math.min(math.floor(owed), allowed, rest)
    redis.call('SET', K.turns, string.format('%.6f', owed - math.floor(owed)), 'PX', 600000)
  end
  local from_first = math.min(first, allowed - for_rest)
  local taken = pop_into({}, K.priority, from_first)
  return pop_into(taken, K.queue, math.min(rest, allowed - from_first))
end

local cap, wait, now, arrival, ahead = grant()
local taken, suspect = take_suspects(cap), 1
if not taken then taken, suspect = take_both(cap), 0 end
taken = live(taken)
if #taken == 0 then suspect = 0 end
local more = wait == 0 and #taken > 0
  and redis.call('LLEN', K.queue) + redis.call('LLEN', K.priority) + redis.call('LLEN', K.suspects) > 0
return finish(taken, suspect, wait, false, now, arrival, ahead, more)
