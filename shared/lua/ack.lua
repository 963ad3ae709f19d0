-- ack.lua: a worker is done with entries: release the finished ones, return the untouched ones.
-- KEYS[1]  processing  SET   entries this worker holds
-- KEYS[2]  inflight    HASH  id -> due_ms
-- KEYS[3]  queue       LIST  untouched entries go back to its head
-- KEYS[4]  stats       HASH  counters
-- KEYS[5]  reclaims    HASH  id -> times reclaimed (cleared for ids that completed)
-- KEYS[6]  sweep guard, KEYS[7] dispatch guard   STRING  while either exists, a pass is
--          rereading rows that may be in flight: record what completes in KEYS[8]
-- KEYS[8]  completed   HASH  id -> due_ms (expires 30 s after the last record)
-- ARGV[1]  number of finished entries F
-- ARGV[2..5] counters to add: checked, failed, stale, malformed
-- ARGV[6 .. 5+F]  finished entries; the rest: untouched entries, to check again first
-- Returns  how many finished entries this worker still held.
-- Fencing: an entry counts only while it is still in this worker's set (a reclaimer may have
-- taken it), and the id leaves the in-flight set only if it is still in flight for that same
-- due time, so a paused worker that wakes up late cannot release someone else's work.
local n_done = tonumber(ARGV[1])
local first_back = 6 + n_done

-- What of `ARGV[from..to]` this worker still holds, taken out of its set.
local function still_held(from, to)
  local held = {}
  if to < from then return held end
  if from == 6 and to == #ARGV and redis.call('SCARD', KEYS[1]) == to - from + 1 then
    -- The usual case: the worker acknowledges exactly the batch it holds (it takes no more
    -- until it acknowledges, so an equal count means the same entries).
    for i = from, to do held[#held + 1] = ARGV[i] end
    redis.call('DEL', KEYS[1])
    return held
  end
  for start = from, to, CHUNK do
    local stop = math.min(start + CHUNK - 1, to)
    local flags = redis.call('SMISMEMBER', KEYS[1], unpack(ARGV, start, stop))
    local mine = {}
    for k, f in ipairs(flags) do
      if f == 1 then mine[#mine + 1] = ARGV[start + k - 1] end
    end
    if #mine > 0 then
      redis.call('SREM', KEYS[1], unpack(mine))
      for _, entry in ipairs(mine) do held[#held + 1] = entry end
    end
  end
  return held
end

local finished = still_held(6, first_back - 1)
local guarded = redis.call('EXISTS', KEYS[6], KEYS[7]) > 0
local forgive = redis.call('EXISTS', KEYS[5]) == 1
for start = 1, #finished, CHUNK do
  local stop = math.min(start + CHUNK - 1, #finished)
  local ids, dues = {}, {}
  for i = start, stop do
    local entry = finished[i]
    local colon = string.find(entry, ':', 1, true)
    if colon then  -- a malformed entry has no id: it only leaves the worker's set
      ids[#ids + 1] = string.sub(entry, 1, colon - 1)
      dues[#dues + 1] = string.sub(entry, colon + 1)
    end
  end
  local current = #ids > 0 and redis.call('HMGET', KEYS[2], unpack(ids)) or {}
  local release, pairs_ = {}, {}
  for k = 1, #ids do
    if current[k] == dues[k] then
      release[#release + 1] = ids[k]
      pairs_[#pairs_ + 1] = ids[k]
      pairs_[#pairs_ + 1] = dues[k]
    end
  end
  if #release > 0 then
    redis.call('HDEL', KEYS[2], unpack(release))
    if forgive then redis.call('HDEL', KEYS[5], unpack(release)) end
    if guarded then
      redis.call('HSET', KEYS[8], unpack(pairs_))
      redis.call('PEXPIRE', KEYS[8], 30000)
    end
  end
end

local returned = still_held(first_back, #ARGV)
for i = #returned, 1, -1 do redis.call('LPUSH', KEYS[3], returned[i]) end

local names = {'checked', 'failed', 'stale', 'malformed'}
for i, name in ipairs(names) do
  local n = tonumber(ARGV[1 + i])
  if n > 0 then redis.call('HINCRBY', KEYS[4], name, n) end
end
if #returned > 0 then redis.call('HINCRBY', KEYS[4], 'returned', #returned) end
return #finished
