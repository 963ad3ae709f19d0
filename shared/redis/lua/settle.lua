-- settle.lua: a workload's lists made right for the ordering its leader runs (shared/policies/
-- ordering.py): by a dispatcher that has just taken the lease, before its first push, and then
-- every few seconds (dispatcher/reconciler.py Settler), again while it returns "not done". Each
-- take script reads only its own ordering's lists (_take.lua); entries in the others (left by an
-- older configuration, or given back since by a worker whose settings differ) are moved where
-- this ordering's take reads them, or, going to groups (a plain entry does not say its group),
-- released and asked for again: their ids leave inflight and go to the asked list, which the
-- dispatcher pushes, with their groups, as it pushes `now`. At most BUDGET entries a call; with
-- nothing to move and the name recorded, three reads.
-- KEYS[1]  ordering  STRING  the ordering the lists are settled for (read by empty takes)
-- KEYS[2]  queue     LIST    the plain entries
-- KEYS[3]  priority  LIST    the priority rows' entries (priority_column)
-- KEYS[4]  turns     STRING  the rest's share carried over (take_priority.lua)
-- KEYS[5]  inflight  HASH    id -> due_ms; KEYS[6] again HASH, KEYS[7] asked LIST: a released id
--          is asked for again (and leaves `again`); KEYS[8] dropped SET
-- KEYS[9]  group rates HASH (take_grouped.lua); KEYS[10] leader STRING: the lease's holder
-- KEYS[11..] the group keys (GROUP_KEYS of them, _lib.lua group_keys)
-- ARGV[1]  the ordering's name; ARGV[2] '1' if it reads the priority list (priority); ARGV[3] '1'
--          if it is grouped (groups, groups with priority: one take, take_grouped.lua)
-- ARGV[4]  the settling dispatcher's id: nothing moves unless it holds the lease (a deposed
--          leader of other settings, waking late, must not undo what the new one settled)
-- Returns  {entries moved, entries released and asked for again, 1 if settled (the name
--          recorded) else 0 (call again), the name recorded before ('' if none: a new workload,
--          or an older version)},
--          or {-1, 0, 0, ''} if the caller does not hold the lease
local K = {ordering = KEYS[1], queue = KEYS[2], priority = KEYS[3], turns = KEYS[4],
           inflight = KEYS[5], again = KEYS[6], asked = KEYS[7], dropped = KEYS[8],
           group_rates = KEYS[9], leader = KEYS[10]}
local G = group_keys(11)
local name, with_priority, grouped = ARGV[1], ARGV[2] == '1', ARGV[3] == '1'
if redis.call('GET', K.leader) ~= ARGV[4] then return {-1, 0, 0, ''} end
local before = redis.call('GET', K.ordering) or ''

-- Settled already, and none of the keys a run would move from or delete exists: one EXISTS,
-- not a dozen reads and deletes (the leader looks every few seconds, idle or not).
local foreign
if grouped then
  foreign = {K.priority, K.queue}
else
  foreign = {G.ring, G.sleeping, G.full, G.waiting, G.urgent, G.urgent_waiting, G.open, G.failing, G.cut,
             G.of, G.running, K.group_rates}
  if not with_priority then foreign[#foreign + 1] = K.priority end
end
if not with_priority then foreign[#foreign + 1] = K.turns end
if before == name and redis.call('EXISTS', unpack(foreign)) == 0 then return {0, 0, 1, before} end

local BUDGET = 10000
local left, moved, released = BUDGET, 0, 0

-- Entries no list holds any more: each still holding its id releases it and asks for it again
-- (counted as released); a stale one (its id no longer in flight for its due time) just goes.
local function release(entries)
  for _, entry in ipairs(entries) do
    local id = id_of(entry)
    if id and redis.call('HGET', K.inflight, id) == sub(entry, #id + 2) then
      redis.call('HDEL', K.inflight, id)
      redis.call('HDEL', K.again, id)
      redis.call('RPUSH', K.asked, id)
      released = released + 1
    end
  end
  chunked('SREM', K.dropped, entries)
  left = left - #entries
end

-- Up to `left` entries of one list to the tail of another; whether the list is empty now.
local function move_all(from, to)
  while left > 0 do
    local got = redis.call('LPOP', from, math.min(CHUNK, left))
    if not got then return true end
    redis.call('RPUSH', to, unpack(got))
    moved, left = moved + #got, left - #got
  end
  return redis.call('EXISTS', from) == 0
end

if grouped then  -- the plain lists' entries: released, asked for again with their groups
  for _, list in ipairs({K.priority, K.queue}) do
    while left > 0 do
      local got = redis.call('LPOP', list, math.min(CHUNK, left))
      if not got then break end
      release(got)
    end
  end
  if not with_priority then redis.call('DEL', K.turns) end
else
  if not with_priority then  -- the priority list to the queue's head, in its order
    while left > 0 and redis.call('LMOVE', K.priority, K.queue, 'RIGHT', 'LEFT') do
      moved, left = moved + 1, left - 1
    end
    redis.call('DEL', K.turns)
  end
  -- Each group with entries (the ring, sleeping or full: _lib.lua's invariant): its priority
  -- list to the priority list (or the queue), its other list to the queue.
  while left > 0 do
    local group = redis.call('LPOP', G.ring) or redis.call('ZPOPMIN', G.sleeping)[1] or redis.call('SPOP', G.full)
    if not group then break end
    local emptied = move_all(urgent_list(G, group), with_priority and K.priority or K.queue)
    if not (emptied and move_all(G.prefix .. group, K.queue)) then redis.call('LPUSH', G.ring, group) end
  end
  if left > 0 then  -- no group waits: their state goes, and entries workers hold are given back
    -- to this ordering's lists (an ack finds no group of theirs)
    redis.call('DEL', G.ring, G.sleeping, G.full, G.waiting, G.urgent, G.urgent_waiting, G.open, G.failing, G.cut,
      G.of, G.running, K.group_rates)
  end
  if moved > 0 then wake_one(G.wake) end
end
local done = left > 0
if done then redis.call('SET', K.ordering, name) end
return {moved, released, done and 1 or 0, before}
