-- _take_groups.lua (included by pop.lua): a grouped workload's take, from its groups in turn.
--
-- What the workload's limits allow comes from the groups in the ring (G.ring) in turn, each
-- giving at most its fair share of the take (the take over the groups in the ring, at least 1),
-- its tokens (group_rate_limit: a cell rate as the workload's, per group, in K.group_rates) and
-- its room (group_max_in_flight). A group its limits hold back leaves the ring: for the sleeping
-- set until its next token is due (woken by the first take after that, at most one take's worth
-- each), or for the full set until an ack gives room. A visit costs O(1) whatever the number of
-- groups, and a take visits at most 2 x its size + 8 groups: O(batch). Each take that visits
-- groups also reads about as many fields of K.group_rates again (HSCAN, its cursor in the field
-- '~cursor') and deletes those whose time has passed, so the hash holds about the groups whose
-- tokens still run ahead of now, not every group ever seen. A field whose time has passed means
-- nothing (a group's arrival is never before now); the hash expires a second after its times
-- could all have passed. With priority, a group's visit takes from its priority list first
-- (_group_rounds.lua visit_group), within the group's limits all the same.
--
-- The group lists are read whatever A.grouped says (as the priority list): entries left there
-- by a configuration that had a group column are taken, without group limits, until none are
-- left (pop.lua calls this while any group waits).

-- taken: the take so far; most_taken: what the grant allows in all; wait: the grant's.
-- Returns taken, the wait (as grant's), and the group whose own limits held the take back
-- (false if none; a name may be '').
local function take_groups(taken, most_taken, wait)
  local grouped, grate, gburst, gmost = A.grouped, A.grate, A.gburst, A.gmost
  local gnow = clock_us()
  local gahead = grate > 0 and gburst * 1000000 / grate or 0
  local want = most_taken - #taken
  local held_back = false
  local woken = redis.call('ZRANGEBYSCORE', G.sleeping, '-inf', grouped and math.floor(gnow / 1000) or '+inf',
    'LIMIT', 0, want + 8)
  if not grouped then  -- no limits now: groups held back by the old ones go back in turn
    for _, name in ipairs(redis.call('SPOP', G.full, want + 8)) do woken[#woken + 1] = name end
  end
  if #woken > 0 then
    chunked('ZREM', G.sleeping, woken)
    chunked('RPUSH', G.ring, woken)
  end
  local ring = redis.call('LLEN', G.ring)
  local quantum = math.max(1, math.floor(want / math.max(ring, 1)))
  local visits_left = math.min(2 * ring, 2 * want + 8)
  local D = {any = redis.call('EXISTS', K.dropped) == 1, left = DROPS_PER_TAKE}
  -- With priority: the groups whose priority lists hold entries, the rest's share (pop.lua ARGV[8])
  local any_urgent = redis.call('EXISTS', G.urgent) == 1
  local T = {share = tonumber(A.priority_share) or 0, owed = 0, popped = 0, urgent = 0}
  if any_urgent and T.share > 0 then T.owed = tonumber(redis.call('GET', K.turns) or 0) end
  local pairs_, visited_all, emptied = {}, 0, {}
  local any_open, gnow_ms = redis.call('EXISTS', G.open) == 1, math.floor(gnow / 1000)
  -- Rounds: the next groups of the ring at once, their tokens and room read in one command each;
  -- per group visited, one LPOP (and an LLEN when it gave all it was asked); their tokens and
  -- where each goes afterwards are written once per round.
  while #taken < most_taken and visits_left > 0 do
    local names = redis.call('LPOP', G.ring, visits_left)
    if not names then break end
    local spent, arrivals, runs, urgent, opens = {}, {}, {}, {}, {}
    if any_urgent then urgent = per_name('SMISMEMBER', G.urgent, names) end
    if grate > 0 then arrivals = per_name('HMGET', K.group_rates, names) end
    if gmost > 0 then runs = per_name('HMGET', G.running, names) end
    if any_open then opens = per_name('HMGET', G.open, names) end
    local again, full, sleeping, running_now, visited = {}, {}, {}, {}, 0
    for i, name in ipairs(names) do
      if #taken >= most_taken then break end
      visited = i
      local room, arrival, run = math.min(quantum, most_taken - #taken), 0, 0
      local until_ms, open_for = breaker_wait(opens[i], gnow_ms)  -- its breaker open: it waits
      if until_ms then room = 0 elseif opens[i] then room = math.min(room, 1) end  -- or a probe
      if grate > 0 then
        arrival = math.max(tonumber(arrivals[i]) or 0, gnow)
        room = math.min(room, math.floor((gnow + gahead - arrival) * grate / 1000000))
      end
      if gmost > 0 then
        run = tonumber(runs[i]) or 0
        room = math.min(room, gmost - run)
      end
      local more = true  -- entries left in its list (not known to be empty)
      if room > 0 then
        local got, urgent_more
        got, more, urgent_more = visit_group(name, room, urgent[i] == 1, taken, pairs_, D, T)
        if urgent[i] == 1 and not urgent_more then emptied[#emptied + 1] = name end
        if opens[i] and got > 0 then until_ms = probe_taken(name, taken[#taken], gnow_ms, open_for) end
        if got > 0 and grate > 0 then
          arrival = arrival + got * 1000000 / grate
          spent[#spent + 1] = name
          spent[#spent + 1] = string.format('%.0f', arrival)
        end
        if got > 0 and gmost > 0 then
          run = run + got
          running_now[#running_now + 1] = name
          running_now[#running_now + 1] = run
        end
      end
      if more then  -- where the group waits now
        if until_ms then
          sleeping[#sleeping + 1] = until_ms
          sleeping[#sleeping + 1] = name
          held_back = name
        elseif gmost > 0 and run >= gmost then
          full[#full + 1] = name
          held_back = name
        elseif grate > 0 and (gnow + gahead - arrival) * grate < 1000000 then
          sleeping[#sleeping + 1] = math.ceil((arrival - gahead + 1000000 / grate) / 1000)
          sleeping[#sleeping + 1] = name
          held_back = name
        else
          again[#again + 1] = name
        end
      end
    end
    visits_left = visits_left - visited
    visited_all = visited_all + visited
    if #spent > 0 then chunked('HSET', K.group_rates, spent, HASHTABLE) end
    if #running_now > 0 then chunked('HSET', G.running, running_now, HASHTABLE) end
    place_groups(names, visited, again, full, sleeping)
  end
  if T.popped > 0 then redis.call('DECRBY', G.waiting, T.popped) end
  if T.urgent > 0 then redis.call('DECRBY', G.urgent_waiting, T.urgent) end
  if #emptied > 0 then chunked('SREM', G.urgent, emptied) end
  if any_urgent and T.share > 0 then redis.call('SET', K.turns, string.format('%.6f', T.owed), 'PX', 600000) end
  if grate > 0 and visited_all > 0 then sweep_rates(gnow, gahead, visited_all) end
  if #pairs_ > 0 then chunked('HSET', G.of, pairs_, HASHTABLE) end
  if #taken > 0 then
    held_back = false
    if redis.call('LLEN', G.ring) > 0 then group_wake(G) end  -- more to take: an idle worker may
  elseif wait == 0 and redis.call('LLEN', G.ring) > 0 then
    wait = 1  -- the visits ran out on groups held back: the next take goes on round the ring
  elseif wait == 0 then
    local first = redis.call('ZRANGE', G.sleeping, 0, 0, 'WITHSCORES')
    if #first > 0 then
      wait = math.max(tonumber(first[2]) - math.floor(gnow / 1000), 1)
      held_back = first[1]
    elseif redis.call('SCARD', G.full) > 0 then
      wait = -1
      if not held_back then held_back = redis.call('SRANDMEMBER', G.full) end
    end
  end
  return taken, wait, held_back
end
