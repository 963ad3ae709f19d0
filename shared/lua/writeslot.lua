-- writeslot.lua: take or give back one of a workload's write slots, deployment-wide.
-- KEYS[1]  writers  ZSET  holder -> when its slot lapses (ms on the Redis clock)
-- KEYS[2]  freed    LIST  one element per slot given back, for a waiter's BLPOP (at most
--                         ARGV[3] long): waiters block instead of asking again and again
-- ARGV[1]  the holder (a worker id)
-- ARGV[2]  "take" or "give"
-- ARGV[3]  how many slots there are
-- ARGV[4]  how long a slot is held at most, in ms: a holder that dies frees it then
-- Returns  1 if the holder now has a slot (take) or gave one back (give), else 0.
-- Why: every write-back moves its rows' entries to the same end of the due index, and many
-- at once contend inside InnoDB (measured: 24 writers cost MySQL twice what 2 cost per row).
-- A slot held past its lease simply lapses: at worst one more writer than the limit for a while.
local slots, lease = tonumber(ARGV[3]), tonumber(ARGV[4])
if ARGV[2] == 'give' then
  local gave = redis.call('ZREM', KEYS[1], ARGV[1])
  if gave == 1 then
    redis.call('LPUSH', KEYS[2], '1')
    redis.call('LTRIM', KEYS[2], 0, slots - 1)
    redis.call('PEXPIRE', KEYS[2], lease)
  end
  return gave
end
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZSCORE', KEYS[1], ARGV[1]) or redis.call('ZCARD', KEYS[1]) < slots then
  redis.call('ZADD', KEYS[1], now + lease, ARGV[1])
  redis.call('PEXPIRE', KEYS[1], lease)
  return 1
end
return 0
