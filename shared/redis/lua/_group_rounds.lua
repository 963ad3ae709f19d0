-- _group_rounds.lua (included by take_grouped.lua, for _take_groups.lua): a visit's pops from a group's
-- lists, what a round of visits to the groups writes once, and forgetting their arrival times.

-- The turn a take's end cut short (G.cut): the fraction of its group's share left (of a share
-- of the next take's size: takes differ), and its name (false if none).
local function turn_left()
  local value = redis.call('GET', G.cut)
  if not value then return 0, false end
  local colon = find(value, ':', 1, true)
  return tonumber(sub(value, 1, colon - 1)), sub(value, colon + 1)
end

-- A group's limits: its own (its G.limits value "rate:in flight:weight", each '' for the
-- workload's: the group limits table, docs/groups.md) or the workload's group limits. Returns its
-- rate, how far its tokens may run ahead (us: its burst, a tenth of a second of its rate, at
-- least one), its room (0: none) and its weight (a visit gives up to weight x the fair share).
local function limits_of(own, grate, gahead, gmost)
  if not own then return grate, gahead, gmost, 1 end
  local rate, most, weight = string.match(own, '^([^:]*):([^:]*):([^:]*)$')
  rate, most, weight = tonumber(rate) or grate, tonumber(most) or gmost, tonumber(weight) or 1
  local ahead = gahead
  if rate ~= grate then ahead = rate > 0 and math.max(1, math.floor(rate * 0.1 + 0.5)) * 1000000 / rate or 0 end
  return rate, ahead, most, weight
end

-- A group its breaker opened (state: its G.open value; false: closed): the ms until which it
-- waits (false once its next probe's time has come: a visit then takes one entry, the probe),
-- and its open time. A probe taken: the group waits for its outcome (_group_breaker.lua), or
-- one open time more should it never come (its worker died); returns until when.
local function breaker_wait(state, now_ms)
  if not state then return false, 0 end
  local next_ms, open_for = split_open(state)
  return now_ms < next_ms and next_ms, open_for
end
local function probe_taken(name, probe, now_ms, open_for)
  redis.call('HSET', G.open, name, string.format('%d:%d:%s', now_ms + open_for, open_for, probe))
  return now_ms + open_for
end

-- Up to `wanted` live entries of one of a group's lists into taken, each with its group in
-- pairs_ (for G.of). Dropped entries (paused, superseded) take no token and no room: the visit
-- goes on past them, up to D.left of them per take (D.any: any entry is dropped at all).
-- Returns how many were taken, whether the list may hold more (true if not looked at) and how
-- many entries left it (dropped ones too).
local function pop_group(list, name, wanted, taken, pairs_, D)
  if wanted <= 0 then return 0, true, 0 end
  local got, more, skipped, gone = 0, true, 0, 0
  repeat
    local popped = redis.call('LPOP', list, wanted) or {}
    gone = gone + #popped
    more = #popped == wanted and redis.call('LLEN', list) > 0
    local fresh = D.any and live(popped, room_back) or popped
    for _, entry in ipairs(fresh) do
      taken[#taken + 1] = entry
      pairs_[#pairs_ + 1] = entry
      pairs_[#pairs_ + 1] = name
    end
    got, wanted, skipped = got + #fresh, wanted - #fresh, #popped - #fresh
    D.left = D.left - skipped
  until not more or skipped == 0 or wanted <= 0 or D.left <= 0
  return got, more, gone
end

-- A group's visit with `room`: its priority list first if `urgent` (it holds entries), but
-- for the rest's share while its other list waits too (T.owed: the share owed, its fraction
-- carried over in K.turns as _take_lists.lua does), then its other list; either's shortfall
-- is filled from the other. Returns how many were taken, whether its lists may hold more and
-- whether its priority list may; T.popped, T.urgent count the entries that left the lists.
local function visit_group(name, room, urgent, taken, pairs_, D, T)
  local list = G.prefix .. name
  if not urgent then
    local got, more, gone = pop_group(list, name, room, taken, pairs_, D)
    T.popped = T.popped + gone
    return got, more, false
  end
  local first = room
  if T.share > 0 and redis.call('LLEN', list) > 0 then
    T.owed = T.owed + room * T.share
    first = room - math.min(math.floor(T.owed), room)
    T.owed = T.owed - math.floor(T.owed)
  end
  local ulist = urgent_list(G, name)
  local got, urgent_more, gone = pop_group(ulist, name, first, taken, pairs_, D)
  local got_rest, more, gone_rest = pop_group(list, name, room - got, taken, pairs_, D)
  local got_more, gone_more = 0, 0
  if urgent_more and got + got_rest < room then
    got_more, urgent_more, gone_more = pop_group(ulist, name, room - got - got_rest, taken, pairs_, D)
  end
  T.urgent = T.urgent + gone + gone_more
  T.popped = T.popped + gone + gone_rest + gone_more
  return got + got_rest + got_more, more or urgent_more, urgent_more
end

-- Where each group of a round waits now: the unvisited first in the ring (before them a group
-- whose turn the take's end cut short: it goes on next time), then as decided.
local function place_groups(names, visited, again, full, sleeping, cut)
  local unvisited = {}  -- first next time, in their order
  for i = #names, visited + 1, -1 do unvisited[#unvisited + 1] = names[i] end
  if cut then unvisited[#unvisited + 1] = cut end
  if #unvisited > 0 then chunked('LPUSH', G.ring, unvisited) end
  if #full > 0 then chunked('SADD', G.full, full) end
  if #sleeping > 0 then chunked('ZADD', G.sleeping, sleeping) end
  if #again > 0 then chunked('RPUSH', G.ring, again) end
end

-- The arrival times of groups whose lists were emptied (K.rates_emptied, this take's `drained`
-- added: score, name, ...), deleted from K.group_rates once passed, at most `most` a take: a group
-- visited again since keeps its newer time (and is remembered again when next emptied). A group
-- with entries waiting keeps its time: it is visited again, and it is needed then.
local function forget_rates(gnow, gahead, drained, most)
  local rates, emptied = K.group_rates, K.rates_emptied
  if #drained > 0 then chunked('ZADD', emptied, drained) end
  local due = redis.call('ZRANGEBYSCORE', emptied, '-inf', '(' .. string.format('%.0f', gnow), 'LIMIT', 0, most)
  if #due > 0 then
    local past = {}
    for i, value in ipairs(per_name('HMGET', rates, due)) do
      local at = tonumber(value)
      if not at or at < gnow then past[#past + 1] = due[i] end
    end
    if #past > 0 then chunked('HDEL', rates, past) end
    chunked('ZREM', emptied, due)
  end
  -- No time stored runs more than gahead past the take that wrote it (a visit takes at most
  -- the tokens it has): once that has passed with no take writing, both mean nothing.
  local ttl = math.ceil(gahead / 1000) + 1000
  redis.call('PEXPIRE', rates, ttl)
  redis.call('PEXPIRE', emptied, ttl)
end
