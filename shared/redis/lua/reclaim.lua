-- reclaim.lua: give back what a dead worker held (its heartbeat key has expired).
-- KEYS[1]  heartbeat   STRING  the worker's heartbeat; if it still exists the worker is alive
-- KEYS[2]  processing  SET     entries it held
-- KEYS[3]  landing     LIST    entries a blocking BLMOVE delivered (workers before 2026-11-28's
--                              wake tokens; read while an upgrade may leave some)
-- KEYS[4]  suspects    LIST    groups of reclaimed entries ("e1 e2 ..."), each taken as one batch
-- KEYS[5]  reclaims    HASH    id -> deaths + ARGV[4] * deaths alone (cleared when the id completes)
-- KEYS[6]  workers     SET     registered workers (the dead one is removed)
-- KEYS[7]  quarantine  HASH    id -> entry, for ids to be parked in MySQL
-- KEYS[8]  stats       HASH    counters "reclaimed", "poisoned"
-- KEYS[9]  running     HASH    worker -> checks it may be running (max_in_flight, the takes): the
--          dead worker's checks ended with it
-- KEYS[10..] the group keys (GROUP_KEYS of them, _lib.lua group_keys): an entry set aside for quarantine gives its
--          group's room back; reclaimed ones keep it (still in transit: their next holder's ack
--          gives it back)
-- ARGV[1]  worker id
-- ARGV[2]  deaths after which an id that died alone twice is quarantined
-- ARGV[3]  how many groups to split this partition's share of a dead worker's entries into (the
--          reconciler gives each partition its proportion of 8, reclaim_split)
-- ARGV[4]  what a death alone adds to the reclaims count on top of 1 (a power of two far above
--          any death count: the count stays one integer, one HINCRBY, one HDEL)
-- ARGV[5]  how many groups when one of them was reclaimed before (8): a group that kills again
--          is split again in its own partition, whatever else its worker held
-- Returns  false if the worker is alive, else {reclaimed, poisoned}.
--
-- Isolating a row whose check kills its worker, without slowing everything else down: what a
-- dead worker held comes back split into ARGV[3] groups, each checked as a batch. A group that
-- kills again is split again, so a poison id is alone after about log_k(batch) deaths; only an
-- id that died alone twice, having been reclaimed ARGV[2] times, is quarantined. A worker killed for
-- unrelated reasons costs k smaller batches, and a poison id's batch-mates are never quarantined.
-- Twice alone, not once: workers killed again and again (an OOM killer, a bad deploy) may catch an
-- innocent id alone once, in its small retry batch; catching it alone twice running is the check.
-- Reclaimed ids stay in the in-flight set: they are still in transit, just elsewhere.
if redis.call('EXISTS', KEYS[1]) == 1 then return false end
-- #include _group_release

local held = redis.call('SMEMBERS', KEYS[2])
for _, entry in ipairs(redis.call('LRANGE', KEYS[3], 0, -1)) do held[#held + 1] = entry end
table.sort(held)
local limit = tonumber(ARGV[2])
local alone_weight = tonumber(ARGV[4])
local poisoned = 0
local kept, parked = {}, {}
local again = false  -- an entry here died with a worker before
for _, entry in ipairs(held) do
  local id = id_of(entry)
  if id then
    local times = redis.call('HINCRBY', KEYS[5], id, #held == 1 and alone_weight + 1 or 1)
    if times % alone_weight >= 2 then again = true end
    if #held == 1 and times % alone_weight >= limit and math.floor(times / alone_weight) >= 2 then
      redis.call('HSET', KEYS[7], id, entry)
      poisoned = poisoned + 1
      parked[#parked + 1] = entry
    else
      kept[#kept + 1] = entry
    end
  end
end
local groups = math.min(again and tonumber(ARGV[5]) or tonumber(ARGV[3]), #kept)
for g = 1, groups do
  local group = {}
  for i = g, #kept, groups do group[#group + 1] = kept[i] end
  redis.call('RPUSH', KEYS[4], table.concat(group, ' '))
end
group_release(group_keys(10), parked)
if groups > 0 then group_wake(group_keys(10)) end  -- an idle worker takes the first group now
redis.call('DEL', KEYS[2], KEYS[3])
redis.call('SREM', KEYS[6], ARGV[1])
redis.call('HDEL', KEYS[9], ARGV[1])
if #held > 0 then redis.call('HINCRBY', KEYS[8], 'reclaimed', #held) end
if poisoned > 0 then redis.call('HINCRBY', KEYS[8], 'poisoned', poisoned) end
return {#held, poisoned}
