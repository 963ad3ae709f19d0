-- take_fifo.lua: a worker's take of a workload that orders its rows first in, first out (by due
-- time: no priority column, no groups), within the workload's limits.
-- KEYS[1..11], ARGV[1..9] and the reply: _take.lua
-- KEYS[12] queue  LIST  entries waiting, the oldest due first (dispatch.lua)
-- #include _take
K.queue = KEYS[12]
-- #include _take_grant
-- #include _take_lists
-- #include _take_drops

local cap, wait, now, arrival, ahead = grant()
local taken, suspect = take_suspects(cap), 1
if not taken then taken, suspect = pop_into({}, K.queue, cap), 0 end
taken = live(taken)
if #taken == 0 then suspect = 0 end
local more = wait == 0 and #taken > 0 and redis.call('LLEN', K.queue) + redis.call('LLEN', K.suspects) > 0
return finish(taken, suspect, wait, false, now, arrival, ahead, more)
