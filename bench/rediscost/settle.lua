-- settle.lua: finish the rehashing of big hashes and sorted sets a bench has just filled, so that
-- what it times next is not slowed by it (bench/rediscost/groupab.py).
-- Redis doubles a hash's table as it grows and moves the old table's buckets over one at a time,
-- one per operation on that key, looking in both tables meanwhile: a hash of 600,000 fields
-- written in one go is left with about half its fields still to move, and reads in it cost up to
-- half as much again until enough operations have run on it. Each lookup here moves a bucket.
-- KEYS[1..] hashes or sorted sets; returns how many lookups ran.
local lookups = 0
for _, key in ipairs(KEYS) do
  local kind = redis.call('TYPE', key).ok
  local n = kind == 'hash' and redis.call('HLEN', key) or kind == 'zset' and redis.call('ZCARD', key) or 0
  for _ = 1, n do
    if kind == 'hash' then redis.call('HEXISTS', key, '~settle') else redis.call('ZSCORE', key, '~settle') end
  end
  lookups = lookups + n
end
return lookups
