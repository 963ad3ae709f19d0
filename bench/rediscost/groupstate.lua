-- groupstate.lua: the least Redis work exact per-group limits need for one take and its ack,
-- whatever the data structure (recheck bench --mode groups, its "group state" column).
-- KEYS[1]  tokens  HASH  group -> its rate limit's arrival time (as take_grouped.lua's groups:rates)
-- KEYS[2]  room    HASH  group -> checks running (as groups:running)
-- ARGV[1..] the distinct groups one take gives entries from, their names as the lists spell them
-- Returns  how many groups it touched.
-- Each group a take gives entries from must have its tokens read and moved on and its running
-- count read and raised, and the ack must read and lower that count again: one HMGET and one
-- HSET of every such group in each of the three, nothing else (no entry is moved). A take of 500
-- from 500 groups pays this 500 times, a take of 500 from 10 groups 10 times.
local names = ARGV
local function read_and_write(hash)
  local values = redis.call('HMGET', hash, unpack(names))
  local pairs_ = {}
  for i, value in ipairs(values) do
    pairs_[#pairs_ + 1] = names[i]
    pairs_[#pairs_ + 1] = value or '1'
  end
  redis.call('HSET', hash, unpack(pairs_))
end
read_and_write(KEYS[1])  -- the take: tokens
read_and_write(KEYS[2])  -- the take: room
read_and_write(KEYS[2])  -- the ack: room given back
return #names
