-- pop.lua: a worker takes a batch into the set of entries it holds, within the workload's limits.
-- KEYS[1]  queue       LIST  entries waiting
-- KEYS[2]  suspects    LIST  groups of reclaimed entries ("e1 e2 ..."), see reclaim.lua; a group
--                            is taken alone, as one batch, before anything from the queue
-- KEYS[3]  processing  SET   entries this worker holds
-- KEYS[4]  landing     LIST  where a blocking BLMOVE delivered (held, too): workers before the wake
--                            tokens blocked that way; taken first while an upgrade may leave some
-- KEYS[5]  rate        STRING  the rate limit's "theoretical arrival time" (GCRA), microseconds
--                            on the Redis clock: tokens are the time it runs ahead of now
-- KEYS[6]  running     HASH  worker -> checks it may be running (max_in_flight's count)
-- KEYS[7]  workers     SET   registered workers (a grant's fair share divides by them)
-- KEYS[8]  dropped     SET   entries to drop, not start (_take_drops.lua)
-- KEYS[9]  inflight    HASH  id -> due_ms; a dropped entry still holding its id releases it
-- KEYS[10] again       HASH  id -> 1 (dispatch.lua); KEYS[11] asked LIST: a released id asked
--                            for meanwhile is asked again, as ack.lua does
-- KEYS[12] priority    LIST  the priority rows' entries (dispatch.lua), taken before KEYS[1]'s
-- KEYS[13] turns       STRING  the rest's share of takes not handed out yet (a fraction of one)
-- KEYS[14..] the group keys (GROUP_KEYS of them, _lib.lua group_keys): a grouped workload's entries wait in its
--          groups' lists, taken in turn (_take_groups.lua); for any workload, a take that leaves
--          entries waiting wakes one more idle worker (their wake list)
-- KEYS[14 + GROUP_KEYS] group rates HASH  group -> its rate limit's arrival time (us on the Redis clock, as
--          KEYS[5]), read and written once per round of visits
-- ARGV[1]  how many entries at most (0: only move what landed, e.g. at shutdown)
-- ARGV[2]  1: take no reclaimed group (the caller is filling a batch it has begun elsewhere,
--          another partition of the workload: a group must stay alone in its batch)
-- ARGV[3]  rate_limit's share of this partition, checks per second (0: no limit)
-- ARGV[4]  burst: the most tokens one grant hands out over all workers (about 0.1 s of rate)
-- ARGV[5]  max_in_flight's share of this partition (0: no limit)
-- ARGV[6]  this worker's id; ARGV[7] checks it is running right now (entries it still holds
--          whose check ended do not count: its write-back is not a call to the provider)
-- ARGV[8]  priority_share: while both lists wait, this share of each take's entries comes from
--          KEYS[1] all the same (of a group's visit, from its other list); '' if the workload has
--          no priority column (0: what the priority lists hold goes first)
-- ARGV[9]  '1' for a grouped workload (group_column), else ''
-- ARGV[10] group_rate_limit (0: none), ARGV[11] a group's burst, ARGV[12] group_max_in_flight
-- ARGV[13] now in microseconds, set by a test's clock; '' (always, in production): the Redis
--          clock, read with TIME, the one clock every worker's host shares for the limits' state
-- ARGV[14..] entries this worker holds whose checks have ended since its last take (per-row
--          checks of a grouped workload): their groups' room is given back now, not at their
--          ack after the write-back (group_max_in_flight counts calls); entries it no longer
--          holds (reclaimed meanwhile) give nothing back, and their ack gives nothing twice
-- Returns  {suspect (1 if this is a reclaimed group), {entries...}, groups still waiting,
--          wait: 0 if the limits did not stop this take, else milliseconds until tokens are
--          due (the rate limit or a group's), or -1 (max_in_flight or a group's: wait until
--          checks end), '=' and the hex name of a group its own limits held back when nothing
--          was taken for that reason, else ''}
--
-- In parts (included where named, by shared/redis/store.py): the grant of the workload's limits
-- (_take_grant.lua), the reclaimed group and the priority and plain queues (_take_lists.lua),
-- dropped entries left out (_take_drops.lua), the groups' turns (_take_groups.lua, with
-- _group_rounds.lua).
local K = {queue = KEYS[1], suspects = KEYS[2], processing = KEYS[3], landing = KEYS[4],
           rate = KEYS[5], running = KEYS[6], workers = KEYS[7], dropped = KEYS[8],
           inflight = KEYS[9], again = KEYS[10], asked = KEYS[11], priority = KEYS[12],
           turns = KEYS[13], group_rates = KEYS[14 + GROUP_KEYS]}
local G = group_keys(14)
local A = {limit = tonumber(ARGV[1]), no_group = ARGV[2] == '1', rate = tonumber(ARGV[3]),
           burst = tonumber(ARGV[4]), most = tonumber(ARGV[5]), worker = ARGV[6],
           running = tonumber(ARGV[7]), priority_share = ARGV[8], grouped = ARGV[9] == '1',
           grate = tonumber(ARGV[10]), gburst = tonumber(ARGV[11]), gmost = tonumber(ARGV[12]),
           now = ARGV[13] or ''}

-- #include _take_grant
-- #include _take_lists
-- #include _group_release
-- #include _take_drops
-- #include _group_rounds
-- #include _take_groups

if #ARGV >= 14 then
  local ended = {unpack(ARGV, 14, math.min(#ARGV, 13 + CHUNK))}  -- at most a take's worth
  local flags, mine = redis.call('SMISMEMBER', K.processing, unpack(ended)), {}
  for i, flag in ipairs(flags) do
    if flag == 1 then mine[#mine + 1] = ended[i] end
  end
  group_release(G, mine, true)
end

local taken = redis.call('LRANGE', K.landing, 0, -1)
if #taken > 0 then redis.call('DEL', K.landing) end
local cap, wait, now, arrival, ahead = grant(taken)
local allowed = math.max(cap - #taken, 0)
local most_taken = #taken + allowed  -- what landed, and what the lists may still give
local suspect
taken, suspect = take_lists(taken, allowed)
taken = live(taken)
if #taken == 0 then suspect = 0 end

local held_back = false
if suspect == 0 and most_taken > #taken
    and (A.grouped or redis.call('EXISTS', G.ring, G.sleeping, G.full) > 0) then
  taken, wait, held_back = take_groups(taken, most_taken, wait)
end
if #taken > 0 then chunked('SADD', K.processing, taken) end
spend(taken, now, arrival, ahead)
if not A.grouped and wait == 0 and #taken > 0
    and redis.call('LLEN', K.queue) + redis.call('LLEN', K.priority) + redis.call('LLEN', K.suspects) > 0 then
  group_wake(G)  -- more than this take: one more idle worker (each woken worker wakes the next)
end
return {suspect, taken, redis.call('LLEN', K.suspects), wait, held_back and '=' .. held_back or ''}
