-- dispatch.lua: push due entries to the queue, each id at most once in queue or in flight (but
-- for an entry superseded by `now`, which no take starts).
-- KEYS[1]  queue     LIST    entries waiting for a worker (pushed at the tail)
-- KEYS[2]  inflight  HASH    id -> due_ms of the entry holding it; the dedup set
-- KEYS[3]  stats     HASH    counter "dispatched"
-- KEYS[4]  epoch     STRING  exists while Redis keeps its data; created here when missing
-- KEYS[5]  leader    STRING  the dispatcher holding the lease
-- KEYS[6]  completed the prefix of the HASHes id -> due_ms completed while a guarded pass ran
--          (ack.lua), in this time's window and the one before (_lib.lua completed_windows): an
--          entry found there was read while in flight and finished before this push; skip it
-- KEYS[7]  again     HASH    id -> 1: an id found in flight for ANOTHER due time (the application
--          made its row due while it was being checked: that check's write will be fenced out);
--          ack.lua asks for it again the moment it is released, so it is checked right after
-- KEYS[8]  dropped   SET     entries a take drops instead of starting (_take_drops.lua): a head push
--          supersedes an id's older entry, wherever it waits, rather than waiting behind it
-- KEYS[9]  priority  LIST    the priority rows' entries (priority_column), taken first (take_priority.lua)
-- KEYS[10..] the group keys (GROUP_KEYS of them, _lib.lua), KEYS[10 + GROUP_KEYS] workers SET (idle workers woken)
-- ARGV[1]  the pushing dispatcher's id: nothing is pushed unless it holds the lease, so a
--          deposed leader that wakes up late cannot push (dedup would also hold; a second line)
-- ARGV[2]  "tail" (a page of due rows), "head" (rows the application asked for now: before
--          whatever waits) or "priority" (a page of the priority pass: to the tail of KEYS[9],
--          or of KEYS[1] while both are empty: then nothing waits before them); a head push
--          goes to the head of KEYS[9] while that holds entries (it is taken first)
-- ARGV[3]  now in microseconds, set by a test's clock; '' (always, in production): the Redis
--          clock, read with TIME (the completions' windows: the clock ack.lua records them by)
-- ARGV[4..] entries "id:due_ms", oldest due first; a grouped workload's (group_column) are
--          "id:due_ms:hexgroup" and go, as "id:due_ms", to their group's list (tail, or head for
--          "head"), or its priority list for "priority" (_group_push.lua), the group joining the
--          ring if its lists were empty; idle workers are woken through the wake list (one token
--          per entry pushed, at most one per worker; for any other workload, one token: the
--          worker it wakes wakes the next if its take leaves entries, _take_grant.lua finish)
-- Returns  {pushed, queue_length_after (of KEYS[9] for "priority"; for a grouped workload what
--          waits in its groups' priority lists for "priority", else in their other lists and the
--          queue), lost (1 if the epoch key
--          was missing: Redis lost its data, so rows behind the dispatcher's cursor may have
--          lost their entries)}, or {-1, queue_length, 0} if the caller does not hold the lease
-- A tail push skips an id already in flight whatever its due time: its row will be written back
-- (or fenced out) by whoever holds it, and the next due time is read again from MySQL (at once
-- when the due times differ: KEYS[7]). A head push (`now`) of an id in flight for another due
-- time pushes the new entry anyway and adds the old one to KEYS[8]: an old entry still queued,
-- maybe behind a backlog, is dropped by the take that reaches it, so the row is checked within a
-- poll; one a worker already holds finishes as before (its write fenced out, its ack releasing
-- nothing: the id is in flight for the new due time), while the new one may start meanwhile.
-- A head push of an id queued for the SAME due time (the page dispatcher saw the row first,
-- e.g. one just resumed) moves that entry to the head if it is among the last MOVE_SCAN of the
-- queue (where a page just put it), looking through at most MOVE_BUDGET entries per call; one
-- further back, or held by a worker, stays where it is.
local K = {queue = KEYS[1], inflight = KEYS[2], stats = KEYS[3], epoch = KEYS[4], leader = KEYS[5],
           completed = KEYS[6], again = KEYS[7], dropped = KEYS[8], priority = KEYS[9],
           workers = KEYS[10 + GROUP_KEYS]}
local G = group_keys(10)

-- #include _push_entries
-- #include _group_push

if redis.call('GET', K.leader) ~= ARGV[1] then
  return {-1, redis.call('LLEN', K.queue), 0}
end
local lost = 0
if redis.call('EXISTS', K.epoch) == 0 then
  redis.call('SET', K.epoch, '1')
  lost = 1
end
local completed_now, completed_before = completed_windows(K.completed, ARGV[3])
local guarded = redis.call('EXISTS', completed_now, completed_before) > 0
local head = ARGV[2] == 'head'
local push = head and 'LPUSH' or 'RPUSH'
-- Where the entries go: a page of the rest's to the queue; a priority page to the priority list
-- unless both lists are empty (then the queue, where idle workers wait); a head push (`now`) to
-- the head of the list taken first: the priority list while it holds entries, else the queue.
local into = K.queue
if (ARGV[2] == 'priority' and redis.call('LLEN', K.queue) + redis.call('LLEN', K.priority) > 0)
    or (head and redis.call('LLEN', K.priority) > 0) then
  into = K.priority
end
local DROPPED_TTL_MS = 86400000  -- an old entry a worker already held is never taken: forgotten
local MOVE_SCAN, MOVE_BUDGET = 10000, 100000
local budget = head and MOVE_BUDGET or 0
local pushed, grouped = 0, 0
for start = 4, #ARGV, CHUNK do
  local ids, dues, entries, names, n = parse_entries(start, math.min(start + CHUNK - 1, #ARGV))
  local held = redis.call('HMGET', K.inflight, unpack(ids))
  local done, done_before = {}, {}
  if guarded then
    done = redis.call('HMGET', completed_now, unpack(ids))
    done_before = redis.call('HMGET', completed_before, unpack(ids))
  end
  local fresh, pairs_, seen, moved, fresh_names = {}, {}, {}, {}, {}
  local f = 0
  for k = 1, n do
    local id = ids[k]
    local admit = not held[k]  -- the usual case: not in flight
    if held[k] == dues[k] and budget > 0 and not seen[id] then
      local scan = math.min(MOVE_SCAN, budget)
      budget = budget - scan
      local where = move_up(entries[k], names[k], scan, into)
      if where == 'moved' then moved[#moved + 1] = entries[k] end
      if where then seen[id] = true end
    end
    if held[k] and held[k] ~= dues[k] then
      -- Only a NEWER due time supersedes: a head push read before the row was checked and
      -- dispatched again (short intervals) must not drop the live entry for a stale one.
      if head and tonumber(dues[k]) > tonumber(held[k]) then
        redis.call('SADD', K.dropped, id .. ':' .. held[k])
        redis.call('PEXPIRE', K.dropped, DROPPED_TTL_MS)
        redis.call('HDEL', K.again, id)  -- the new entry is the check asked for
        admit = true  -- superseded
      else
        redis.call('HSET', K.again, id, 1)
        redis.call('PEXPIRE', K.again, 600000)  -- an id reclaimed instead of released: forgotten
      end
    end
    if admit and done[k] ~= dues[k] and done_before[k] ~= dues[k] and not seen[id] then
      seen[id] = true
      f = f + 1
      fresh[f] = entries[k]
      fresh_names[f] = names[k]
      pairs_[2 * f - 1] = id
      pairs_[2 * f] = dues[k]
    end
  end
  if #moved > 0 then redis.call('LPUSH', into, unpack(moved)) end
  if #fresh > 0 then
    redis.call('HSET', K.inflight, unpack(pairs_))
    if #fresh_names == 0 then
      redis.call(push, into, unpack(fresh))
    elseif head then
      group_push_head(G, fresh, fresh_names)
    else
      group_push_tail(G, fresh, fresh_names, ARGV[2] == 'priority')
    end
    pushed = pushed + #fresh
    grouped = grouped + #fresh_names
  end
end
if pushed > 0 then redis.call('HINCRBY', K.stats, 'dispatched', pushed) end
if grouped > 0 then
  local tokens = math.min(grouped, math.max(redis.call('SCARD', K.workers), 1)) - redis.call('LLEN', G.wake)
  for _ = 1, tokens do redis.call('RPUSH', G.wake, '~') end
elseif pushed > 0 then
  group_wake(G)  -- one idle worker; it wakes the next if its take leaves entries (the takes)
end
if redis.call('EXISTS', G.waiting) == 1 then  -- a grouped workload: what waits in its groups
  local urgent = tonumber(redis.call('GET', G.urgent_waiting) or 0)
  if ARGV[2] == 'priority' then return {pushed, urgent, lost} end
  return {pushed, tonumber(redis.call('GET', G.waiting)) - urgent + redis.call('LLEN', K.queue), lost}
end
return {pushed, redis.call('LLEN', ARGV[2] == 'priority' and K.priority or K.queue), lost}
