-- _ack_release.lua (included by ack.lua, after _group_push.lua): finished and deferred entries leave the in-flight set.

-- Release ARGV[from..to] that the worker still held (s.held[i]) and that are still in flight for
-- their due time; returns how many were held. `completing`: record them for guarded passes
-- (s.guarded: in s.completed until s.completed_until) and forgive their reclaims (s.forgive).
-- An id asked for while in flight (s.asked_again) goes to the asked list as it is released.
local function release(s, from, to, completing)
  local count = 0
  for start = from, to, CHUNK do
    local stop = math.min(start + CHUNK - 1, to)
    local ids, dues, n = {}, {}, 0
    for i = start, stop do
      if s.held[i] then
        count = count + 1
        local entry = ARGV[i]
        local colon = find(entry, ':', 1, true)
        if colon then  -- a malformed entry has no id: it only leaves the worker's set
          n = n + 1
          ids[n] = sub(entry, 1, colon - 1)
          dues[n] = sub(entry, colon + 1)
        end
      end
    end
    local current = n > 0 and redis.call('HMGET', K.inflight, unpack(ids)) or {}
    local record = completing and s.guarded
    local released, pairs_, r = {}, {}, 0
    for k = 1, n do
      if current[k] == dues[k] then
        r = r + 1
        released[r] = ids[k]
        if record then
          pairs_[2 * r - 1] = ids[k]
          pairs_[2 * r] = dues[k]
        end
      end
    end
    if r > 0 then
      redis.call('HDEL', K.inflight, unpack(released))
      if s.asked_again then
        local flags = redis.call('HMGET', K.again, unpack(released))
        for k, flag in ipairs(flags) do
          if flag then
            redis.call('HDEL', K.again, released[k])
            redis.call('RPUSH', K.asked, released[k])
          end
        end
      end
      if completing and s.forgive then redis.call('HDEL', K.reclaims, unpack(released)) end
      if record then
        redis.call('HSET', s.completed, unpack(pairs_))
        redis.call('PEXPIREAT', s.completed, s.completed_until)
      end
    end
  end
  return count
end

-- Untouched entries ARGV[first_back..] the worker still held go back to be checked first: to
-- the head of their group's list if a group gave them (they had their group's turn and token),
-- else to the head of the list taken first (the priority list while it holds entries: an entry
-- does not say which list it came from; a rest's entry given back then goes first once). Every
-- entry leaving the worker gives its group's room back. Returns how many went back.
local function give_back(held, first_back)
  local back = {}
  for i = first_back, #ARGV do
    if held[i] then back[#back + 1] = ARGV[i] end
  end
  local groups_of = {}
  if redis.call('EXISTS', G.of) == 1 then  -- entries taken from groups: no per-entry work otherwise
    if #back > 0 then
      for _, reply in ipairs(chunked('HMGET', G.of, back)) do
        for _, name in ipairs(reply) do  -- (a '~' marks room given back as its check ended)
          groups_of[#groups_of + 1] = name and (sub(name, 1, 1) == '~' and sub(name, 2) or name)
        end
      end
    end
    local leaving = {}
    for i = FIRST, #ARGV do
      if held[i] then leaving[#leaving + 1] = ARGV[i] end
    end
    group_release(G, leaving)
  end
  local back_to = K.queue
  if #back > 0 and redis.call('LLEN', K.priority) > 0 then back_to = K.priority end
  local to_groups, names = {}, {}
  for i = #back, 1, -1 do
    if groups_of[i] then
      to_groups[#to_groups + 1] = back[i]
      names[#names + 1] = groups_of[i]
    else
      redis.call('LPUSH', back_to, back[i])
    end
  end
  if #to_groups > 0 then group_push_head(G, to_groups, names) end
  if #back > 0 then group_wake(G) end
  return #back
end
