-- _group_breaker.lua (included by ack.lua): each group's breaker (group_breaker_failures,
-- docs/groups.md) judges its checks' outcomes as workers acknowledge them.
--
-- A closed group counts its checks that failed in a row (G.failing; an acknowledgement with a
-- success of the group starts it over). At the threshold the group opens: G.open holds "next
-- probe ms:open ms:" and its rows wait in its lists (a take's visit sends it to G.sleeping until
-- then: no call, no attempt). A visit after that time takes ONE entry, the probe, and writes it in
-- (_group_rounds.lua probe_taken). The probe's success closes the group, back in turn at once;
-- its failure doubles the open time, up to the most. Other outcomes of an open group (checks
-- taken before it opened, a probe's that came too late) change nothing.

-- The held entries ARGV[first..last], the first n_failed of which failed; spec: "failures in a
-- row:open ms:most open ms" ('' without a breaker); now_ms: the clock's. Returns the names of the
-- groups opened, closed, and kept open by a failed probe (the worker logs each).
local function judge_groups(held, first, n_failed, last, spec, now_ms)
  local opened, closed, kept = {}, {}, {}
  if spec == '' or last < first or redis.call('EXISTS', G.of) == 0 then return opened, closed, kept end
  local threshold, open_ms, most_ms = string.match(spec, '^(%d+):(%d+):(%d+)$')
  threshold, open_ms, most_ms = tonumber(threshold), tonumber(open_ms), tonumber(most_ms)
  local names, fails, oks, ok_of = {}, {}, {}, {}
  for start = first, last, CHUNK do
    local found = redis.call('HMGET', G.of, unpack(ARGV, start, math.min(start + CHUNK - 1, last)))
    for k, name in ipairs(found) do
      local i = start + k - 1
      if name and held[i] then
        if sub(name, 1, 1) == '~' then name = sub(name, 2) end  -- its room given back already
        if not fails[name] then
          names[#names + 1] = name
          fails[name], oks[name] = 0, 0
        end
        local ok = i >= first + n_failed
        if ok then oks[name] = oks[name] + 1 else fails[name] = fails[name] + 1 end
        ok_of[ARGV[i]] = ok
      end
    end
  end
  local states = redis.call('EXISTS', G.open) == 1 and per_name('HMGET', G.open, names) or {}
  local started_over = {}
  for i, name in ipairs(names) do
    if states[i] then
      local _, open_for, probe = split_open(states[i])
      local ok = ok_of[probe]
      if ok == true then
        redis.call('HDEL', G.open, name)
        if redis.call('ZREM', G.sleeping, name) == 1 then  -- rows waiting: back in turn now
          redis.call('RPUSH', G.ring, name)
          group_wake(G)
        end
        closed[#closed + 1] = name
      elseif ok == false then
        open_for = math.min(open_for * 2, most_ms)
        redis.call('HSET', G.open, name, string.format('%d:%d:', now_ms + open_for, open_for))
        redis.call('ZADD', G.sleeping, 'XX', now_ms + open_for, name)
        kept[#kept + 1] = name
      end
    elseif oks[name] > 0 then
      started_over[#started_over + 1] = name
    elseif redis.call('HINCRBY', G.failing, name, fails[name]) >= threshold then
      redis.call('HDEL', G.failing, name)
      redis.call('HSET', G.open, name, string.format('%d:%d:', now_ms + open_ms, open_ms))
      redis.call('ZADD', G.sleeping, 'XX', 'GT', now_ms + open_ms, name)
      opened[#opened + 1] = name
    end
  end
  if #started_over > 0 and redis.call('EXISTS', G.failing) == 1 then chunked('HDEL', G.failing, started_over) end
  return opened, closed, kept
end
