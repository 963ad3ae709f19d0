-- writeslot.lua: take or give back one of a workload's write slots, deployment-wide.
-- KEYS[1]     freed  LIST    one element per slot given back, for a waiter's BLPOP (at most as
--                            long as there are slots): waiters block instead of asking again and again
-- KEYS[2..]   slots  STRING  one key per slot: its holder, with a TTL (the slot's lease)
-- ARGV[1]  the holder (a worker id)
-- ARGV[2]  "take", "renew" (only if already held: the holder's heartbeat) or "give"
-- ARGV[3]  how long a slot is held at most, in ms: a holder that dies frees it then
-- Returns  the slot's number (take, renew: the one held; give: the one given back), or 0 if none.
-- Why: every write-back moves its rows' entries to the same end of the due index, and many
-- at once contend inside InnoDB (measured: 24 writers cost MySQL twice what 2 cost per row).
-- A slot held past its lease simply lapses (Redis expires its key: no clock is read here): at
-- worst one more writer than the limit for a while.
local holder, lease = ARGV[1], tonumber(ARGV[3])
for i = 2, #KEYS do
  if redis.call('GET', KEYS[i]) == holder then
    if ARGV[2] == 'give' then
      redis.call('DEL', KEYS[i])
      redis.call('LPUSH', KEYS[1], '1')
      redis.call('LTRIM', KEYS[1], 0, #KEYS - 2)
      redis.call('PEXPIRE', KEYS[1], lease)
    else
      redis.call('PEXPIRE', KEYS[i], lease)
    end
    return i - 1
  end
end
if ARGV[2] == 'take' then
  for i = 2, #KEYS do
    if redis.call('SET', KEYS[i], holder, 'NX', 'PX', lease) then return i - 1 end
  end
end
return 0
