-- take_grouped.lua: a worker's take of a grouped workload (group_column, docs/groups.md; with a
-- priority column too, each group's priority rows first): from its groups in turn, each within
-- its own limits (_take_groups.lua), and within the workload's.
-- KEYS[1..11], ARGV[1..9] and the reply: _take.lua
-- KEYS[12..] the group keys (GROUP_KEYS of them, _lib.lua group_keys)
-- KEYS[12 + GROUP_KEYS] group rates  HASH  group -> its rate limit's arrival time (us, the
--          clock of KEYS[3]), read and written once per round of visits
-- KEYS[13 + GROUP_KEYS] turns  STRING  with priority: the other lists' share of visits not
--          handed out yet (a fraction of one, as take_priority.lua's)
-- KEYS[14 + GROUP_KEYS] emptied  ZSET  group -> its arrival time, of groups whose lists a take
--          emptied: their times are deleted from group rates once passed (_group_rounds.lua)
-- ARGV[10] priority_share: of a group's visit while both its lists wait, the share from its
--          other list ('' without a priority column: its priority list is read only while some
--          group's holds entries, one EXISTS per take)
-- ARGV[11] group_rate_limit (0: none), ARGV[12] a group's burst, ARGV[13] group_max_in_flight
-- ARGV[14..] entries this worker holds whose checks have ended since its last take (per-row
--          checks): their groups' room is given back now, not at their ack after the
--          write-back (group_max_in_flight counts calls); entries it no longer holds (reclaimed
--          meanwhile) give nothing back, and their ack gives nothing twice
-- #include _take
K.group_rates, K.turns, K.rates_emptied = KEYS[12 + GROUP_KEYS], KEYS[13 + GROUP_KEYS], KEYS[14 + GROUP_KEYS]
local G = group_keys(12)
A.priority_share, A.grate, A.gburst, A.gmost = ARGV[10], tonumber(ARGV[11]), tonumber(ARGV[12]), tonumber(ARGV[13])
-- #include _take_grant
-- #include _take_lists
-- #include _group_release
-- #include _take_drops
local function room_back(gone) group_release(G, gone) end
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

local cap, wait, now, arrival, ahead = grant()
local taken, suspect, held_back = live(take_suspects(cap) or {}, room_back), 1, false
if #taken == 0 then  -- no reclaimed group, or all of it dropped: the groups' turn
  suspect = 0
  if cap > 0 then taken, wait, held_back = take_groups(taken, cap, wait) end
end
return finish(taken, suspect, wait, held_back, now, arrival, ahead, false)
