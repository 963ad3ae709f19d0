-- _take.lua (included first by each take script: take_fifo.lua, take_priority.lua,
-- take_grouped.lua, one per ordering, shared/policies/ordering.py): the keys and arguments every
-- take begins with, by name. A take moves a batch into the set of entries the worker holds,
-- within the workload's limits: a reclaimed group alone first, else what its ordering's lists
-- give. It reads no list of another ordering: entries an older configuration left there are
-- moved once, by the leader that runs the new one (settle.lua).
-- KEYS[1]  suspects    LIST  groups of reclaimed entries ("e1 e2 ..."), see reclaim.lua; a group
--                            is taken alone, as one batch, before anything from the lists
-- KEYS[2]  processing  SET   entries this worker holds
-- KEYS[3]  rate        STRING  the rate limit's "theoretical arrival time" (GCRA), microseconds
--                            of the clock: tokens are the time it runs ahead of now
-- KEYS[4]  running     HASH  worker -> checks it may be running (max_in_flight's count)
-- KEYS[5]  workers     SET   registered workers (a grant's fair share divides by them)
-- KEYS[6]  dropped     SET   entries to drop, not start (_take_drops.lua)
-- KEYS[7]  inflight    HASH  id -> due_ms; a dropped entry still holding its id releases it
-- KEYS[8]  again       HASH  id -> 1 (dispatch.lua); KEYS[9] asked LIST: a released id asked
--                            for meanwhile is asked again, as ack.lua does
-- KEYS[10] wake        LIST  tokens idle workers block on: a take that leaves entries waiting
--                            wakes one more (_lib.lua wake_one)
-- KEYS[11] ordering    STRING  the ordering the leader settled the lists for (settle.lua), read
--                            by a take that found nothing: a worker whose settings order the
--                            workload otherwise is told (its lists are not the ones filled)
-- ARGV[1]  how many entries at most (0: none; a take of 0 only gives room back, take_grouped.lua)
-- ARGV[2]  1: take no reclaimed group (the caller is filling a batch it has begun elsewhere,
--          another partition of the workload: a group must stay alone in its batch)
-- ARGV[3]  rate_limit's share of this partition, checks per second (0: no limit)
-- ARGV[4]  burst: the most tokens one grant hands out over all workers (about 0.1 s of rate)
-- ARGV[5]  max_in_flight's share of this partition (0: no limit)
-- ARGV[6]  this worker's id; ARGV[7] checks it is running right now (entries it still holds
--          whose check ended do not count: its write-back is not a call to the provider)
-- ARGV[8]  now in microseconds. Set by a test's clock; '' (always, in production): the script
--          reads the Redis clock (TIME), the one clock every worker's host shares, which the
--          limits' state (arrival times) is kept on
-- ARGV[9]  the name of the worker's ordering ("fifo", "priority", "groups", ...)
-- Returns  {suspect (1 if this is a reclaimed group), {entries...}, groups still waiting,
--          wait: 0 if the limits did not stop this take, else milliseconds until tokens are
--          due (the rate limit or a group's), or -1 (max_in_flight or a group's: wait until
--          checks end), '=' and the hex name of a group its own limits held back when nothing
--          was taken for that reason, else '', and the ordering the leader settled for when
--          this take found nothing and it is not ARGV[9], else ''}
local K = {suspects = KEYS[1], processing = KEYS[2], rate = KEYS[3], running = KEYS[4],
           workers = KEYS[5], dropped = KEYS[6], inflight = KEYS[7], again = KEYS[8],
           asked = KEYS[9], wake = KEYS[10], ordering = KEYS[11]}
local A = {limit = tonumber(ARGV[1]), no_group = ARGV[2] == '1', rate = tonumber(ARGV[3]),
           burst = tonumber(ARGV[4]), most = tonumber(ARGV[5]), worker = ARGV[6],
           running = tonumber(ARGV[7]), now = ARGV[8], ordering = ARGV[9]}
