-- ack.lua: a worker is done with entries: release the finished ones, return the untouched ones.
-- KEYS[1]  processing  SET   entries this worker holds
-- KEYS[2]  inflight    HASH  id -> due_ms
-- KEYS[3]  queue       LIST  untouched entries go back to its head
-- KEYS[4]  stats       HASH  counters
-- KEYS[5]  reclaims    HASH  id -> times reclaimed (cleared for ids that completed)
-- KEYS[6]  sweep guard, KEYS[7] dispatch guard, KEYS[13 + GROUP_KEYS] asked guard   STRING  while any exists,
--          a pass is rereading rows that may be in flight: record what completes in KEYS[8]
-- KEYS[8]  completed   the prefix of the HASHes id -> due_ms, one per 10 s window of the Redis
--          clock (_lib.lua completed_windows): a completion is recorded in its time's window
-- KEYS[9]  again       HASH  id -> 1: asked for while in flight (dispatch.lua); released ones
--          go to KEYS[10], the asked LIST the dispatcher reads, to be checked again at once
-- KEYS[11] dropped     SET   entries a take must drop (_take_drops.lua): one this worker held and now
--          releases will never be taken again, so it leaves the set here (else it stays a day)
-- KEYS[12] priority    LIST  the priority rows' queue (dispatch.lua): while it holds entries,
--          untouched entries go back to ITS head, the list taken first (an entry does not say
--          which list it came from; a rest's entry given back then goes first once)
-- KEYS[13..] the group keys (GROUP_KEYS of them, _lib.lua group_keys): a grouped workload's entries give their
--          group's room back (group_max_in_flight); untouched ones go back to the head of their
--          group's list (they had their group's turn and token), not to the queue
-- KEYS[14 + GROUP_KEYS] suspects  LIST  reclaimed groups (the takes): counted in the reply's "waiting"
-- ARGV[1]  1 if these entries are everything the worker holds (a batch worker's ack), else 0
-- ARGV[2]  number of finished entries F (written back, fenced out, malformed, or gone: the row was
--          deleted since its dispatch)
-- ARGV[3]  number of deferred entries D (not written: another transaction held the row)
-- ARGV[4..9] counters to add: checked, failed, stale, malformed, deferred, gone
-- ARGV[10] now in microseconds, set by a test's clock; '' (always, in production): the Redis
--          clock, read with TIME (the completions' windows: the clock dispatch.lua reads them by)
-- ARGV[11] how many of the finished entries failed: the first ones (a group's breaker counts them)
-- ARGV[12] the groups' breaker, "failures in a row:open ms:most open ms"; '' for none
-- ARGV[13 .. 12+F] finished entries; ARGV[13+F .. 12+F+D] deferred entries; the rest: untouched
--          entries, to check again first
-- Returns  {how many finished entries this worker still held, {groups its breaker opened},
--          {groups closed again}, {groups kept open by a failed probe}} (_group_breaker.lua),
--          entries waiting in the queue, the priority queue and the suspects after this ack (a
--          batch worker that sees none waits for work at once, without an empty take first)}
-- Fencing: an entry counts only while it is still in this worker's set (a reclaimer may have
-- taken it), and the id leaves the in-flight set only if it is still in flight for that same
-- due time, so a paused worker that wakes up late cannot release someone else's work.
-- Deferred entries leave the in-flight set like finished ones, but are not recorded as
-- completed: their row still has that due time, and the sweep must be free to dispatch it.
local K = {processing = KEYS[1], inflight = KEYS[2], queue = KEYS[3], stats = KEYS[4],
           reclaims = KEYS[5], sweep_guard = KEYS[6], dispatch_guard = KEYS[7], completed = KEYS[8],
           again = KEYS[9], asked = KEYS[10], dropped = KEYS[11], priority = KEYS[12],
           asked_guard = KEYS[13 + GROUP_KEYS], suspects = KEYS[14 + GROUP_KEYS]}
local G = group_keys(13)
local FIRST = 13

-- #include _group_push
-- #include _group_release
-- #include _ack_release
-- #include _group_breaker

local whole = ARGV[1] == '1'
local n_done, n_deferred = tonumber(ARGV[2]), tonumber(ARGV[3])
local first_deferred, first_back = FIRST + n_done, FIRST + n_done + n_deferred

-- held[i] for every entry ARGV[i] that this worker still holds; those leave its set.
local held = {}
if whole and redis.call('SCARD', K.processing) == #ARGV - FIRST + 1 then
  -- The usual case: a batch worker acknowledges exactly the batch it holds (it takes no more
  -- until it acknowledges, so an equal count means the same entries).
  for i = FIRST, #ARGV do held[i] = true end
  redis.call('DEL', K.processing)
else
  for start = FIRST, #ARGV, CHUNK do
    local stop = math.min(start + CHUNK - 1, #ARGV)
    local flags = redis.call('SMISMEMBER', K.processing, unpack(ARGV, start, stop))
    local mine = {}
    for k, f in ipairs(flags) do
      if f == 1 then
        held[start + k - 1] = true
        mine[#mine + 1] = ARGV[start + k - 1]
      end
    end
    if #mine > 0 then redis.call('SREM', K.processing, unpack(mine)) end
  end
end

local state = {held = held, guarded = redis.call('EXISTS', K.sweep_guard, K.dispatch_guard, K.asked_guard) > 0,
               forgive = redis.call('EXISTS', K.reclaims) == 1,
               asked_again = redis.call('EXISTS', K.again) == 1}  -- usually not: no lookup per id then
if state.guarded then
  local _before
  state.completed, _before, state.completed_until = completed_windows(K.completed, ARGV[10])
end

local opened, closed, kept = judge_groups(held, FIRST, tonumber(ARGV[11]), first_deferred - 1, ARGV[12],
  ARGV[12] ~= '' and clock_ms(ARGV[10]) or 0)

if redis.call('EXISTS', K.dropped) == 1 then  -- usually not: one EXISTS per ack then
  local gone = {}
  for i = FIRST, first_back - 1 do
    if held[i] then gone[#gone + 1] = ARGV[i] end
  end
  if #gone > 0 then chunked('SREM', K.dropped, gone) end
end

local finished = release(state, FIRST, first_deferred - 1, true)
release(state, first_deferred, first_back - 1, false)
local returned = give_back(held, first_back)

local counters = {'checked', 'failed', 'stale', 'malformed', 'deferred', 'gone'}
for i, name in ipairs(counters) do
  local n = tonumber(ARGV[3 + i])
  if n > 0 then redis.call('HINCRBY', K.stats, name, n) end
end
if returned > 0 then redis.call('HINCRBY', K.stats, 'returned', returned) end
local waiting = redis.call('LLEN', K.queue) + redis.call('LLEN', K.priority) + redis.call('LLEN', K.suspects)
return {finished, opened, closed, kept, waiting}
