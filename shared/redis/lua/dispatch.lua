-- dispatch.lua: push due entries to the queue, each id at most once in queue or in flight.
-- KEYS[1]  queue     LIST    entries waiting for a worker (pushed at the tail)
-- KEYS[2]  inflight  HASH    id -> due_ms of the entry holding it; the dedup set
-- KEYS[3]  stats     HASH    counter "dispatched"
-- KEYS[4]  epoch     STRING  exists while Redis keeps its data; created here when missing
-- KEYS[5]  leader    STRING  the dispatcher holding the lease
-- KEYS[6]  completed HASH    id -> due_ms completed while a guarded pass ran (see ack.lua): an
--          entry found there was read while in flight and finished before this push; skip it
-- KEYS[7]  again     HASH    id -> 1: an id found in flight for ANOTHER due time (the application
--          made its row due while it was being checked: that check's write will be fenced out);
--          ack.lua asks for it again the moment it is released, so it is checked right after
-- ARGV[1]  the pushing dispatcher's id: nothing is pushed unless it holds the lease, so a
--          deposed leader that wakes up late cannot push (dedup would also hold; a second line)
-- ARGV[2]  "tail" (a page of due rows) or "head" (rows the application asked for now: before
--          whatever waits)
-- ARGV[3..] entries "id:due_ms", oldest due first
-- Returns  {pushed, queue_length_after, lost (1 if the epoch key was missing: Redis lost its
--          data, so rows behind the dispatcher's cursor may have lost their entries)},
--          or {-1, queue_length, 0} if the caller does not hold the lease
-- An id already in flight is skipped whatever its due time: its row will be written back (or
-- fenced out) by whoever holds it, and the next due time is read again from MySQL (at once when
-- the due times differ: KEYS[7]).
if redis.call('GET', KEYS[5]) ~= ARGV[1] then
  return {-1, redis.call('LLEN', KEYS[1]), 0}
end
local lost = 0
if redis.call('EXISTS', KEYS[4]) == 0 then
  redis.call('SET', KEYS[4], '1')
  lost = 1
end
local guarded = redis.call('EXISTS', KEYS[6]) == 1
local push = ARGV[2] == 'head' and 'LPUSH' or 'RPUSH'
local pushed = 0
for start = 3, #ARGV, CHUNK do
  local stop = math.min(start + CHUNK - 1, #ARGV)
  local ids, dues = {}, {}
  for i = start, stop do
    local entry = ARGV[i]
    local colon = string.find(entry, ':', 1, true)
    ids[#ids + 1] = string.sub(entry, 1, colon - 1)
    dues[#dues + 1] = string.sub(entry, colon + 1)
  end
  local held = redis.call('HMGET', KEYS[2], unpack(ids))
  local done = guarded and redis.call('HMGET', KEYS[6], unpack(ids)) or {}
  local fresh, pairs_, seen = {}, {}, {}
  for k = 1, #ids do
    local id = ids[k]
    if held[k] and held[k] ~= dues[k] then
      redis.call('HSET', KEYS[7], id, 1)
      redis.call('PEXPIRE', KEYS[7], 600000)  -- an id reclaimed instead of released: forgotten
    end
    if not held[k] and done[k] ~= dues[k] and not seen[id] then
      seen[id] = true
      fresh[#fresh + 1] = ARGV[start + k - 1]
      pairs_[#pairs_ + 1] = id
      pairs_[#pairs_ + 1] = dues[k]
    end
  end
  if #fresh > 0 then
    redis.call('HSET', KEYS[2], unpack(pairs_))
    redis.call(push, KEYS[1], unpack(fresh))
    pushed = pushed + #fresh
  end
end
if pushed > 0 then redis.call('HINCRBY', KEYS[3], 'dispatched', pushed) end
return {pushed, redis.call('LLEN', KEYS[1]), lost}
