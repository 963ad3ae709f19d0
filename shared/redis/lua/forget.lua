-- forget.lua: remove from a registry the members whose heartbeat key has expired: dispatchers
-- killed before they could withdraw (status and the sharing of leases read every member, so a
-- registry that kept them would grow with every restart).
-- KEYS[1]     registry   SET     member ids
-- KEYS[2..]   heartbeat  STRING  each member's heartbeat key, in the order of ARGV
-- ARGV[1..]   the members
-- Returns     how many were removed.
-- In one script: a member whose key is set again meanwhile (a dispatcher paused past its TTL,
-- beating again) is never removed under a live key; one removed with its key gone registers
-- again at its next beat (SET's GET finds the key gone: Store.heartbeat_replies).
local gone = 0
for i = 2, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 0 then gone = gone + redis.call('SREM', KEYS[1], ARGV[i - 1]) end
end
return gone
