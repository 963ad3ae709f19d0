-- renew.lua: a dispatcher's held leader leases renewed together, in one call per Redis client
-- (dispatcher/lease.py renew_together, from its heartbeat): ten led workloads cost one script
-- call a beat, not ten. Called only for leases the caller believes it holds (a lease it released,
-- or saw lost, is not in KEYS). Each gets its TTL again if still the caller's; one that lapsed
-- with nobody taking it meanwhile (a renewal late on a slow network) is the caller's again, as
-- lease.lua's "hold" renews it; one another dispatcher holds is left as it is.
-- KEYS[1..]  leader  STRING  a workload's lease (single-partition workloads): the holder's id,
--                            with a TTL
-- ARGV[1]    my id
-- ARGV[2]    lease length in ms
-- Returns    each lease's holder after the call, in KEYS' order
local holders = {}
for i, key in ipairs(KEYS) do
  local holder = redis.call('GET', key)
  if holder == ARGV[1] then
    redis.call('PEXPIRE', key, ARGV[2])
  elseif not holder then
    redis.call('SET', key, ARGV[1], 'PX', ARGV[2])
    holder = ARGV[1]
  end
  holders[i] = holder
end
return holders
