-- pop.lua: a worker takes a batch into the set of entries it holds, within the workload's limits.
-- KEYS[1]  queue       LIST  entries waiting
-- KEYS[2]  suspects    LIST  groups of reclaimed entries ("e1 e2 ..."), see reclaim.lua; a group
--                            is taken alone, as one batch, before anything from the queue
-- KEYS[3]  processing  SET   entries this worker holds
-- KEYS[4]  landing     LIST  where this worker's blocking BLMOVE delivered (held, too)
-- KEYS[5]  rate        STRING  the rate limit's "theoretical arrival time" (GCRA), microseconds
--                            on the Redis clock: tokens are the time it runs ahead of now
-- KEYS[6]  running     HASH  worker -> checks it may be running (max_in_flight's count)
-- KEYS[7]  workers     SET   registered workers (a grant's fair share divides by them)
-- KEYS[8]  dropped     SET   entries to drop, not start: superseded by `now` (dispatch.lua) or
--                            of rows paused while queued (Store.drop); each is dropped once
-- KEYS[9]  inflight    HASH  id -> due_ms; a dropped entry still holding its id releases it
-- KEYS[10] again       HASH  id -> 1 (dispatch.lua); KEYS[11] asked LIST: a released id asked
--                            for meanwhile is asked again, as ack.lua does
-- KEYS[12] priority    LIST  the priority rows' entries (dispatch.lua), taken before KEYS[1]'s
-- KEYS[13] turns       STRING  the rest's share of takes not handed out yet (a fraction of one)
-- KEYS[14..21] the group keys (_lib.lua group_keys): a grouped workload's entries wait in its
--          groups' lists, taken in turn (below)
-- KEYS[22] group rates HASH  group -> its rate limit's arrival time (us on the Redis clock, as
--          KEYS[5]), read and written once per round of visits; a field whose time has passed
--          means nothing (a group's arrival is never before now) and is swept away (below); the
--          hash expires a second after its times could all have passed
-- ARGV[1]  how many entries at most (0: only move what landed, e.g. at shutdown)
-- ARGV[2]  1: take no reclaimed group (the caller is filling a batch it has begun elsewhere,
--          another partition of the workload: a group must stay alone in its batch)
-- ARGV[3]  rate_limit's share of this partition, checks per second (0: no limit)
-- ARGV[4]  burst: the most tokens one grant hands out over all workers (about 0.1 s of rate)
-- ARGV[5]  max_in_flight's share of this partition (0: no limit)
-- ARGV[6]  this worker's id; ARGV[7] checks it is running right now (entries it still holds
--          whose check ended do not count: its write-back is not a call to the provider)
-- ARGV[8]  priority_share: while both lists wait, this share of each take's entries comes from
--          KEYS[1] all the same (carried over between takes, so a take of one entry also gives
--          the rest its turn), the others from KEYS[12]; '' if the workload has no priority
--          column (0: what the priority list holds goes first)
-- ARGV[9]  '1' for a grouped workload (group_column), else ''
-- ARGV[10] group_rate_limit (0: none), ARGV[11] a group's burst, ARGV[12] group_max_in_flight
-- ARGV[13] now in microseconds, set by a test's clock; '' (always, in production): the Redis
--          clock, read with TIME, the one clock every worker's host shares for the limits' state
-- Returns  {suspect (1 if this is a reclaimed group), {entries...}, groups still waiting,
--          wait: 0 if the limits did not stop this take, else milliseconds until tokens are
--          due (the rate limit or a group's), or -1 (max_in_flight or a group's: wait until
--          checks end), '=' and the hex name of a group its own limits held back when nothing
--          was taken for that reason, else ''}
--
-- Groups: what the workload's limits allow comes from the groups in the ring in turn, each
-- giving at most its fair share of the take (the take over the groups in the ring, at least 1),
-- its tokens (group_rate_limit, a cell rate as above, per group, in KEYS[22]) and its room
-- (group_max_in_flight). A group its limits hold back leaves the ring: for the sleeping set
-- until its next token is due (woken by the first take after that, at most one take's worth
-- each), or for the full set until an ack gives room. A visit costs O(1) whatever the number of
-- groups, and a take visits at most 2 x its size + 8 groups: O(batch). Each take that visits
-- groups also reads about as many fields of KEYS[22] again (HSCAN, its cursor in the field
-- '~cursor') and deletes those whose time has passed, so the hash holds about the groups whose
-- tokens still run ahead of now, not every group ever seen.
--
-- The rate limit is a generic cell rate algorithm on the Redis clock (one clock for every
-- host): each entry taken moves the arrival time 1/rate on; a take may run up to `burst`
-- tokens ahead of now. Over any window of T seconds, at most rate * T + burst entries are
-- taken. Entries that landed through a blocking wait count like any others: those beyond the
-- tokens (or beyond max_in_flight's room) go back to the head of the queue. A reclaimed group
-- (after a worker died) is taken whole once a take may have one entry: the arrival time then
-- runs further ahead, and later takes wait that much longer. A worker that
-- dies holding entries took their tokens; nothing is given back, so nothing can leak. If Redis
-- loses its data, the limits start over.
-- Dropped entries are left out of the take before anything is counted (they take no token and
-- no room); testing for them costs one EXISTS per take while there are none.
local function clock_us()
  if ARGV[13] and ARGV[13] ~= '' then return tonumber(ARGV[13]) end
  local clock = redis.call('TIME')
  return tonumber(clock[1]) * 1000000 + tonumber(clock[2])
end
local limit = tonumber(ARGV[1])
local rate, burst, most = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local worker, running = ARGV[6], tonumber(ARGV[7])
local taken = redis.call('LRANGE', KEYS[4], 0, -1)
if #taken > 0 then redis.call('DEL', KEYS[4]) end

-- How many entries the limits allow this take in all (what landed included), and why not more.
-- At shutdown (limit 0) what landed is taken whatever the limits: it is only handed back.
local cap, wait = (limit == 0) and #taken or limit, 0
local now, arrival, ahead = 0, 0, 0
if rate > 0 then
  now = clock_us()
  arrival = math.max(tonumber(redis.call('GET', KEYS[5]) or 0), now)
  ahead = burst * 1000000 / rate  -- how far ahead of now the arrival time may run
end
if (rate > 0 or most > 0) and limit > 0 then
  local sharers = math.max(redis.call('SCARD', KEYS[7]), 1)
  if rate > 0 then
    local share = math.max(math.ceil(burst / sharers), 1)
    local tokens = math.floor((now + ahead - arrival) * rate / 1000000)
    cap = math.min(cap, math.max(tokens, 0), share)
    if cap == 0 then
      local want = math.min(limit, share)
      wait = math.max(math.ceil((arrival + want * 1000000 / rate - ahead - now) / 1000), 1)
    end
  end
  if most > 0 then
    local others = 0
    local counts = redis.call('HGETALL', KEYS[6])
    for i = 1, #counts, 2 do
      if counts[i] ~= worker then others = others + tonumber(counts[i + 1]) end
    end
    local mine = math.max(math.ceil(most / sharers), 1)  -- no worker keeps the others out
    local room = math.min(most - others, mine) - running
    if room <= 0 and wait == 0 then wait = -1 end
    cap = math.max(math.min(cap, room), 0)
  end
  -- What a blocking wait delivered beyond that goes back to the head of the queue, in its
  -- order: idle workers each woken with an entry must not start more checks than the limits
  -- allow (they wait for tokens or room like any take).
  for i = #taken, cap + 1, -1 do
    redis.call('LPUSH', KEYS[1], taken[i])
    taken[i] = nil
  end
end
local allowed = math.max(cap - #taken, 0)
local most_taken = #taken + allowed  -- what landed, and what the lists may still give

local suspect = 0
if #taken == 0 and allowed > 0 and ARGV[2] ~= '1' then
  local group = redis.call('LPOP', KEYS[2])
  if group then
    for entry in string.gmatch(group, '%S+') do taken[#taken + 1] = entry end
    suspect = 1
  end
end
local function pop_into(list, n)
  if n <= 0 then return end
  local more = redis.call('LPOP', list, n)
  if not more then return end
  if #taken == 0 then
    taken = more
  else
    local count = #taken
    for i = 1, #more do taken[count + i] = more[i] end
  end
end
-- The priority list is read whatever ARGV[8] says: entries left there by a configuration that
-- had a priority column (or a dispatcher that has one before its workers do) are taken, first.
local first = (suspect == 0 and allowed > 0) and redis.call('LLEN', KEYS[12]) or 0
if first == 0 then
  if suspect == 0 then pop_into(KEYS[1], allowed) end
else
  -- Priority first, but for the rest's share (never more than waits there); either list's
  -- shortfall is filled from the other.
  local rest, for_rest = redis.call('LLEN', KEYS[1]), 0
  if rest > 0 then
    local owed = tonumber(redis.call('GET', KEYS[13]) or 0) + allowed * (tonumber(ARGV[8]) or 0)
    for_rest = math.min(math.floor(owed), allowed, rest)
    redis.call('SET', KEYS[13], string.format('%.6f', owed - math.floor(owed)), 'PX', 600000)
  end
  local from_first = math.min(first, allowed - for_rest)
  pop_into(KEYS[12], from_first)
  pop_into(KEYS[1], math.min(rest, allowed - from_first))
end
-- Entries to start of `entries`: a dropped one leaves the set of dropped entries, releases its
-- id if it still holds it, and gives back its group's room if it held some (a reclaimed entry
-- keeps its group's room until it is taken again: dropped then, it never reaches an ack).
local DROPS_PER_TAKE = 10000

local function live(entries)
  if #entries == 0 or redis.call('EXISTS', KEYS[8]) == 0 then return entries end
  local kept, gone = {}, {}
  for start = 1, #entries, CHUNK do
    local stop = math.min(start + CHUNK - 1, #entries)
    local flags = redis.call('SMISMEMBER', KEYS[8], unpack(entries, start, stop))
    for i = start, stop do
      local entry = entries[i]
      if flags[i - start + 1] == 1 then
        redis.call('SREM', KEYS[8], entry)
        local id = id_of(entry)
        if redis.call('HGET', KEYS[9], id) == string.sub(entry, #id + 2) then
          redis.call('HDEL', KEYS[9], id)
          if redis.call('HDEL', KEYS[10], id) == 1 then redis.call('RPUSH', KEYS[11], id) end
        end
        gone[#gone + 1] = entry
      else
        kept[#kept + 1] = entry
      end
    end
  end
  group_release(group_keys(14), gone)
  return kept
end
taken = live(taken)
if #taken == 0 then suspect = 0 end

-- A grouped workload: the rest of the take from its groups, in turn (see the header).
local held_back = false  -- the group whose own limits held the take back (a name may be '')
local g = group_keys(14)
local grouped = ARGV[9] == '1'
-- The group lists are read whatever ARGV[9] says (as the priority list): entries left there by a
-- configuration that had a group column are taken, without group limits, until none are left.
if suspect == 0 and most_taken > #taken and (grouped or redis.call('EXISTS', g.ring, g.sleeping, g.full) > 0) then
  local grate, gburst, gmost = tonumber(ARGV[10]), tonumber(ARGV[11]), tonumber(ARGV[12])
  local gnow = clock_us()
  local gahead = grate > 0 and gburst * 1000000 / grate or 0
  local want = most_taken - #taken
  local woken = redis.call('ZRANGEBYSCORE', g.sleeping, '-inf', grouped and math.floor(gnow / 1000) or '+inf',
    'LIMIT', 0, want + 8)
  if not grouped then  -- no limits now: groups held back by the old ones go back in turn
    for _, name in ipairs(redis.call('SPOP', g.full, want + 8)) do woken[#woken + 1] = name end
  end
  if #woken > 0 then
    chunked('ZREM', g.sleeping, woken)
    chunked('RPUSH', g.ring, woken)
  end
  local ring = redis.call('LLEN', g.ring)
  local quantum = math.max(1, math.floor(want / math.max(ring, 1)))
  local visits_left = math.min(2 * ring, 2 * want + 8)
  local any_dropped = redis.call('EXISTS', KEYS[8]) == 1
  local drops_left = DROPS_PER_TAKE
  local pairs_, popped_all, visited_all = {}, 0, 0
  local rates = KEYS[22]
  -- Rounds: the next groups of the ring at once, their tokens and room read in one command each;
  -- per group visited, one LPOP (and an LLEN when it gave all it was asked); their tokens and
  -- where each goes afterwards are written once per round.
  while #taken < most_taken and visits_left > 0 do
    local names = redis.call('LPOP', g.ring, visits_left)
    if not names then break end
    local arrivals, runs, spent = {}, {}, {}
    if grate > 0 then
      for _, reply in ipairs(chunked('HMGET', rates, names)) do
        for _, value in ipairs(reply) do arrivals[#arrivals + 1] = value end
      end
    end
    if gmost > 0 then
      for _, reply in ipairs(chunked('HMGET', g.running, names)) do
        for _, value in ipairs(reply) do runs[#runs + 1] = value end
      end
    end
    local again, full, sleeping, running_now, visited = {}, {}, {}, {}, 0
    for i, name in ipairs(names) do
      if #taken >= most_taken then break end
      visited = i
      local list = g.prefix .. name
      local room, arrival, run = math.min(quantum, most_taken - #taken), 0, 0
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
        -- Dropped entries (paused, superseded) take no token and no room: the visit goes on past
        -- them, up to DROPS_PER_TAKE of them per take, so a paused backlog drains in few takes.
        local got, wanted, skipped = 0, room, 0
        repeat
          local popped = redis.call('LPOP', list, wanted) or {}
          popped_all = popped_all + #popped
          more = #popped == wanted and redis.call('LLEN', list) > 0
          local fresh = any_dropped and live(popped) or popped
          for _, entry in ipairs(fresh) do
            taken[#taken + 1] = entry
            pairs_[#pairs_ + 1] = entry
            pairs_[#pairs_ + 1] = name
          end
          got, wanted, skipped = got + #fresh, wanted - #fresh, #popped - #fresh
          drops_left = drops_left - skipped
        until not more or skipped == 0 or wanted <= 0 or drops_left <= 0
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
        if gmost > 0 and run >= gmost then
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
    if #spent > 0 then chunked('HSET', rates, spent, HASHTABLE) end
    local unvisited = {}  -- first next time, in their order
    for i = #names, visited + 1, -1 do unvisited[#unvisited + 1] = names[i] end
    if #unvisited > 0 then chunked('LPUSH', g.ring, unvisited) end
    if #running_now > 0 then chunked('HSET', g.running, running_now, HASHTABLE) end
    if #full > 0 then chunked('SADD', g.full, full) end
    if #sleeping > 0 then chunked('ZADD', g.sleeping, sleeping) end
    if #again > 0 then chunked('RPUSH', g.ring, again) end
  end
  if popped_all > 0 then redis.call('DECRBY', g.waiting, popped_all) end
  if grate > 0 and visited_all > 0 then  -- the sweep: about as many fields as groups visited
    local cursor = redis.call('HGET', rates, '~cursor') or '0'
    local scan = redis.call('HSCAN', rates, cursor, 'COUNT', visited_all)
    local past = {}
    for i = 1, #scan[2], 2 do
      local field, value = scan[2][i], tonumber(scan[2][i + 1])
      -- (the fields '~' and '~cursor' are no group's: _lib.lua HASHTABLE, the cursor)
      if value and value < gnow and string.sub(field, 1, 1) ~= '~' then past[#past + 1] = field end
    end
    if #past > 0 then chunked('HDEL', rates, past) end
    redis.call('HSET', rates, '~cursor', scan[1])
    -- No time stored runs more than gahead past the take that wrote it (a visit takes at most
    -- the tokens it has): once that has passed with no take writing, the hash means nothing.
    redis.call('PEXPIRE', rates, math.ceil(gahead / 1000) + 1000)
  end
  if #pairs_ > 0 then chunked('HSET', g.of, pairs_, HASHTABLE) end
  if #taken > 0 then
    held_back = false
    if redis.call('LLEN', g.ring) > 0 then group_wake(g) end  -- more to take: an idle worker may
  elseif wait == 0 and redis.call('LLEN', g.ring) > 0 then
    wait = 1  -- the visits ran out on groups held back: the next take goes on round the ring
  elseif wait == 0 then
    local first = redis.call('ZRANGE', g.sleeping, 0, 0, 'WITHSCORES')
    if #first > 0 then
      wait = math.max(tonumber(first[2]) - math.floor(gnow / 1000), 1)
      held_back = first[1]
    elseif redis.call('SCARD', g.full) > 0 then
      wait = -1
      if not held_back then held_back = redis.call('SRANDMEMBER', g.full) end
    end
  end
end
if #taken > 0 then chunked('SADD', KEYS[3], taken) end
if rate > 0 and #taken > 0 then
  arrival = arrival + #taken * 1000000 / rate
  redis.call('SET', KEYS[5], string.format('%.0f', arrival), 'PX', math.ceil((arrival - now + ahead) / 1000) + 1000)
end
if most > 0 then
  if running + #taken > 0 then
    redis.call('HSET', KEYS[6], worker, running + #taken)
  else
    redis.call('HDEL', KEYS[6], worker)
  end
end
return {suspect, taken, redis.call('LLEN', KEYS[2]), wait, held_back and '=' .. held_back or ''}
