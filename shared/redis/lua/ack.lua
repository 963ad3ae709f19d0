-- ack.lua: a worker is done with entries: release the finished ones, return the untouched ones.
-- KEYS[1]  processing  SET   entries this worker holds
-- KEYS[2]  inflight    HASH  id -> due_ms
-- KEYS[3]  queue       LIST  untouched entries go back to its head
-- KEYS[4]  stats       HASH  counters
-- KEYS[5]  reclaims    HASH  id -> times reclaimed (cleared for ids that completed)
-- KEYS[6]  sweep guard, KEYS[7] dispatch guard, KEYS[21] asked guard   STRING  while any exists,
--          a pass is rereading rows that may be in flight: record what completes in KEYS[8]
-- KEYS[8]  completed   the prefix of the HASHes id -> due_ms, one per 10 s window of the Redis
--          clock (_lib.lua completed_windows): a completion is recorded in its time's window
-- KEYS[9]  again       HASH  id -> 1: asked for while in flight (dispatch.lua); released ones
--          go to KEYS[10], the asked LIST the dispatcher reads, to be checked again at once
-- KEYS[11] dropped     SET   entries a take must drop (pop.lua): one this worker held and now
--          releases will never be taken again, so it leaves the set here (else it stays a day)
-- KEYS[12] priority    LIST  the priority rows' queue (dispatch.lua): while it holds entries,
--          untouched entries go back to ITS head, the list taken first (an entry does not say
--          which list it came from; a rest's entry given back then goes first once)
-- KEYS[13..20] the group keys (_lib.lua group_keys): a grouped workload's entries give their
--          group's room back (group_max_in_flight); untouched ones go back to the head of their
--          group's list (they had their group's turn and token), not to the queue
-- ARGV[1]  1 if these entries are everything the worker holds (a batch worker's ack), else 0
-- ARGV[2]  number of finished entries F (written back, fenced out, malformed, or gone: the row was
--          deleted since its dispatch)
-- ARGV[3]  number of deferred entries D (not written: another transaction held the row)
-- ARGV[4..9] counters to add: checked, failed, stale, malformed, deferred, gone
-- ARGV[10 .. 9+F] finished entries; ARGV[10+F .. 9+F+D] deferred entries; the rest: untouched
--          entries, to check again first
-- Returns  how many finished entries this worker still held.
-- Fencing: an entry counts only while it is still in this worker's set (a reclaimer may have
-- taken it), and the id leaves the in-flight set only if it is still in flight for that same
-- due time, so a paused worker that wakes up late cannot release someone else's work.
-- Deferred entries leave the in-flight set like finished ones, but are not recorded as
-- completed: their row still has that due time, and the sweep must be free to dispatch it.
local FIRST = 10
local whole = ARGV[1] == '1'
local n_done, n_deferred = tonumber(ARGV[2]), tonumber(ARGV[3])
local first_deferred, first_back = FIRST + n_done, FIRST + n_done + n_deferred

-- held[i] for every entry ARGV[i] that this worker still holds; those leave its set.
local held = {}
if whole and redis.call('SCARD', KEYS[1]) == #ARGV - FIRST + 1 then
  -- The usual case: a batch worker acknowledges exactly the batch it holds (it takes no more
  -- until it acknowledges, so an equal count means the same entries).
  for i = FIRST, #ARGV do held[i] = true end
  redis.call('DEL', KEYS[1])
else
  for start = FIRST, #ARGV, CHUNK do
    local stop = math.min(start + CHUNK - 1, #ARGV)
    local flags = redis.call('SMISMEMBER', KEYS[1], unpack(ARGV, start, stop))
    local mine = {}
    for k, f in ipairs(flags) do
      if f == 1 then
        held[start + k - 1] = true
        mine[#mine + 1] = ARGV[start + k - 1]
      end
    end
    if #mine > 0 then redis.call('SREM', KEYS[1], unpack(mine)) end
  end
end

-- Release ARGV[from..to] still held and still in flight for their due time; returns how many
-- were held. `completing`: record them for guarded passes and forgive their reclaims.
local guarded = redis.call('EXISTS', KEYS[6], KEYS[7], KEYS[21]) > 0
local completed, completed_until
if guarded then
  local _before
  completed, _before, completed_until = completed_windows(KEYS[8])
end
local forgive = redis.call('EXISTS', KEYS[5]) == 1
local asked_again = redis.call('EXISTS', KEYS[9]) == 1  -- usually not: no lookup per id then
local function release(from, to, completing)
  local count = 0
  for start = from, to, CHUNK do
    local stop = math.min(start + CHUNK - 1, to)
    local ids, dues, n = {}, {}, 0
    for i = start, stop do
      if held[i] then
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
    local current = n > 0 and redis.call('HMGET', KEYS[2], unpack(ids)) or {}
    local record = completing and guarded
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
      redis.call('HDEL', KEYS[2], unpack(released))
      if asked_again then
        local flags = redis.call('HMGET', KEYS[9], unpack(released))
        for k, flag in ipairs(flags) do
          if flag then
            redis.call('HDEL', KEYS[9], released[k])
            redis.call('RPUSH', KEYS[10], released[k])
          end
        end
      end
      if completing and forgive then redis.call('HDEL', KEYS[5], unpack(released)) end
      if record then
        redis.call('HSET', completed, unpack(pairs_))
        redis.call('PEXPIREAT', completed, completed_until)
      end
    end
  end
  return count
end

if redis.call('EXISTS', KEYS[11]) == 1 then  -- usually not: one EXISTS per ack then
  local gone = {}
  for i = FIRST, first_back - 1 do
    if held[i] then gone[#gone + 1] = ARGV[i] end
  end
  if #gone > 0 then chunked('SREM', KEYS[11], gone) end
end

local finished = release(FIRST, first_deferred - 1, true)
release(first_deferred, first_back - 1, false)

local returned = 0
local g = group_keys(13)
local back = {}
for i = first_back, #ARGV do
  if held[i] then back[#back + 1] = ARGV[i] end
end
local groups_of = {}
if redis.call('EXISTS', g.of) == 1 then  -- entries taken from groups: no per-entry work otherwise
  if #back > 0 then
    for _, reply in ipairs(chunked('HMGET', g.of, back)) do
      for _, name in ipairs(reply) do groups_of[#groups_of + 1] = name end
    end
  end
  local leaving = {}
  for i = FIRST, #ARGV do
    if held[i] then leaving[#leaving + 1] = ARGV[i] end
  end
  group_release(g, leaving)
end
local back_to = KEYS[3]
if #back > 0 and redis.call('LLEN', KEYS[12]) > 0 then back_to = KEYS[12] end
local to_groups, names = {}, {}
for i = #back, 1, -1 do
  if groups_of[i] then
    to_groups[#to_groups + 1] = back[i]
    names[#names + 1] = groups_of[i]
  else
    redis.call('LPUSH', back_to, back[i])
  end
  returned = returned + 1
end
if #to_groups > 0 then
  group_push_head(g, to_groups, names)
  group_wake(g)
end

local names = {'checked', 'failed', 'stale', 'malformed', 'deferred', 'gone'}
for i, name in ipairs(names) do
  local n = tonumber(ARGV[3 + i])
  if n > 0 then redis.call('HINCRBY', KEYS[4], name, n) end
end
if returned > 0 then redis.call('HINCRBY', KEYS[4], 'returned', returned) end
return finished
