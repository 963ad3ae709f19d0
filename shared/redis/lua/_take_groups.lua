-- _take_groups.lua (included by take_grouped.lua): a grouped workload's take, from its groups in turn.
--
-- What the workload's limits allow comes from the groups in the ring (G.ring) in turn, each
-- giving at most its share (the take over the groups in the ring, at least 1, x its weight; a
-- turn the take's end cut short goes on first next take with the fraction left of it: G.cut), its
-- tokens (group_rate_limit or its own: a cell rate, per group, in K.group_rates) and its room
-- (group_max_in_flight or its own; G.limits). A group held back leaves the ring, for the sleeping
-- set until its next token is due (woken by the first take after, at most a take's worth each) or
-- the full set until an ack gives room. A visit costs O(1) whatever the number of
-- groups, and a take visits at most 2 x its size + 8 groups: O(batch). A group whose lists a
-- visit empties is remembered with its arrival time (K.rates_emptied); each take that visits
-- groups deletes the times of up to about twice as many such groups once passed (a time passed is
-- as good as none), so K.group_rates holds the groups that wait and those whose tokens still run
-- ahead of now; both expire a second after its times could all have passed. With priority, a
-- group's visit takes from its priority list first (_group_rounds.lua visit_group), within the
-- group's limits all the same.

-- taken: the take so far; most_taken: what the grant allows in all; wait: the grant's.
-- Returns taken, the wait (as grant's), and the group whose own limits held the take back
-- (false if none; a name may be '').
local function take_groups(taken, most_taken, wait)
  local grate, gburst, gmost = A.grate, A.gburst, A.gmost
  local gnow = clock_us()
  local gahead = grate > 0 and gburst * 1000000 / grate or 0
  local want = most_taken - #taken
  local held_back = false
  local woken = redis.call('ZRANGEBYSCORE', G.sleeping, '-inf', math.floor(gnow / 1000), 'LIMIT', 0, want + 8)
  if #woken > 0 then
    chunked('ZREM', G.sleeping, woken)
    chunked('RPUSH', G.ring, woken)
  end
  local ring = redis.call('LLEN', G.ring)
  local quantum = math.max(1, math.floor(want / math.max(ring, 1)))
  local visits_left = math.min(2 * ring, 2 * want + 8)
  local D = {any = redis.call('EXISTS', K.dropped) == 1, left = DROPS_PER_TAKE}
  -- With priority: the groups whose priority lists hold entries, the rest's share (ARGV[10])
  local any_urgent = redis.call('EXISTS', G.urgent) == 1
  local T = {share = tonumber(A.priority_share) or 0, owed = 0, popped = 0, urgent = 0}
  if any_urgent and T.share > 0 then T.owed = tonumber(redis.call('GET', K.turns) or 0) end
  local pairs_, visited_all, emptied, left_used, drained = {}, 0, {}, false, {}
  local any_open, gnow_ms = redis.call('EXISTS', G.open) == 1, math.floor(gnow / 1000)
  local any_own = redis.call('EXISTS', G.limits) == 1  -- groups with limits of their own
  local most_ahead = gahead
  local left, left_name = turn_left()
  -- Rounds: the next groups of the ring at once, their tokens and room read in one command each;
  -- per group visited, one LPOP (and an LLEN when it gave all it was asked); their tokens and
  -- where each goes afterwards are written once per round.
  while #taken < most_taken and visits_left > 0 do
    -- as many groups as the rest of the take needs at a share each (a visit that takes gives one at least)
    local names = redis.call('LPOP', G.ring, math.min(visits_left, math.ceil((most_taken - #taken) / quantum)))
    if not names then break end
    local spent, arrivals, runs, urgent, opens, own = {}, {}, {}, {}, {}, {}
    if any_urgent then urgent = per_name('SMISMEMBER', G.urgent, names) end
    if grate > 0 or any_own then arrivals = per_name('HMGET', K.group_rates, names) end
    if gmost > 0 or any_own then runs = per_name('HMGET', G.running, names) end
    if any_open then opens = per_name('HMGET', G.open, names) end
    if any_own then own = per_name('HMGET', G.limits, names) end
    local again, full, sleeping, running_now, visited, cut = {}, {}, {}, {}, 0, false
    for i, name in ipairs(names) do
      if #taken >= most_taken then break end
      visited = i
      local rate, ahead, most, weight = limits_of(own[i], grate, gahead, gmost)
      local whole, share = quantum * weight, quantum * weight  -- its share (a cut turn's: a fraction)
      if name == left_name then share, left_name, left_used = math.max(1, math.floor(left * whole + 0.5)), false, true end
      local room, arrival, run, before = math.min(share, most_taken - #taken), 0, 0, #taken
      local short = room < share  -- the take's end, not its share, sets its room
      local until_ms, open_for = breaker_wait(opens[i], gnow_ms)  -- its breaker open: it waits
      if until_ms then room = 0 elseif opens[i] then room = math.min(room, 1) end  -- or a probe
      if rate > 0 then
        arrival = math.max(tonumber(arrivals[i]) or 0, gnow)
        room = math.min(room, math.floor((gnow + ahead - arrival) * rate / 1000000))
        most_ahead = math.max(most_ahead, ahead)
      end
      if most > 0 then
        run = tonumber(runs[i]) or 0
        room = math.min(room, most - run)
      end
      local more, written = true, false  -- entries left in its list (not known to be empty); its time written
      if room > 0 then
        local got, urgent_more
        got, more, urgent_more = visit_group(name, room, urgent[i] == 1, taken, pairs_, D, T)
        if urgent[i] == 1 and not urgent_more then emptied[#emptied + 1] = name end
        if opens[i] and got > 0 then until_ms = probe_taken(name, taken[#taken], gnow_ms, open_for) end
        if got > 0 and rate > 0 then
          arrival = arrival + got * 1000000 / rate
          spent[#spent + 1] = name
          written = math.floor(arrival + 0.5)  -- a number: redis.call writes it whole (%.17g)
          spent[#spent + 1] = written
        end
        if got > 0 and most > 0 then
          run = run + got
          running_now[#running_now + 1] = name
          running_now[#running_now + 1] = run
        end
      end
      if not more and (written or arrivals[i]) then  -- its lists emptied: its time, to forget once passed
        drained[#drained + 1] = written or tonumber(arrivals[i])
        drained[#drained + 1] = name
      end
      if more then  -- where the group waits now
        if until_ms then
          sleeping[#sleeping + 1] = until_ms
          sleeping[#sleeping + 1] = name
          held_back = name
        elseif most > 0 and run >= most then
          full[#full + 1] = name
          held_back = name
        elseif rate > 0 and (gnow + ahead - arrival) * rate < 1000000 then
          sleeping[#sleeping + 1] = math.ceil((arrival - ahead + 1000000 / rate) / 1000)
          sleeping[#sleeping + 1] = name
          held_back = name
        elseif short and #taken >= most_taken then
          cut, left_used = name, false
          redis.call('SET', G.cut, string.format('%.4f:%s', (share - (#taken - before)) / whole, name), 'PX', 600000)
        else
          again[#again + 1] = name
        end
      end
    end
    visits_left = visits_left - visited
    visited_all = visited_all + visited
    if #spent > 0 then chunked('HSET', K.group_rates, spent, HASHTABLE) end
    if #running_now > 0 then chunked('HSET', G.running, running_now, HASHTABLE) end
    place_groups(names, visited, again, full, sleeping, cut)
  end
  if left_used then redis.call('DEL', G.cut) end
  if T.popped > 0 then redis.call('DECRBY', G.waiting, T.popped) end
  if T.urgent > 0 then redis.call('DECRBY', G.urgent_waiting, T.urgent) end
  if #emptied > 0 then chunked('SREM', G.urgent, emptied) end
  if any_urgent and T.share > 0 then redis.call('SET', K.turns, string.format('%.6f', T.owed), 'PX', 600000) end
  if (grate > 0 or any_own) and visited_all > 0 then forget_rates(gnow, most_ahead, drained, 2 * visited_all + 8) end
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
