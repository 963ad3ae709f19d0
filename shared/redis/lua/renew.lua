-- renew.lua: a dispatcher's held leader leases renewed together, in one call per Redis client
-- (dispatcher/lease.py renew_together, from its heartbeat): ten led workloads cost one script
-- call a beat, not ten. A lease that is still the caller's gets its TTL again; one another
-- dispatcher holds, or that has expired, is left as it is: never taken here (a lease released or
-- lost while the call was under way stays so; taking is lease.lua's "hold").
-- KEYS[1..]  leader  STRING  a workload's lease (single-partition workloads): the holder's id,
--                            with a TTL
-- ARGV[1]    my id
-- ARGV[2]    lease length in ms
-- Returns    each lease's holder after the call, in KEYS' order (false: nobody holds it)
local holders = {}
for i, key in ipairs(KEYS) do
  local holder = redis.call('GET', key)
  if holder == ARGV[1] then redis.call('PEXPIRE', key, ARGV[2]) end
  holders[i] = holder
end
return holders
