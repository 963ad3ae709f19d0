-- lease.lua: hold, renew, take or give up the dispatcher leader lease.
-- KEYS[1]  leader  STRING  the holder's id, with a TTL
-- ARGV[1]  my id
-- ARGV[2]  lease length in ms
-- ARGV[3]  "hold" (renew if mine, take if free) or "release" (give up if mine)
-- Returns  the holder after the call (my id if I hold it), or false if nobody does.
local holder = redis.call('GET', KEYS[1])
if ARGV[3] == 'release' then
  if holder == ARGV[1] then redis.call('DEL', KEYS[1]) end
  return false
end
if holder == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return holder
end
if not holder then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return ARGV[1]
end
return holder
