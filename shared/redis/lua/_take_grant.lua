-- _take_grant.lua (included by the take scripts after _take.lua): how many entries the
-- workload's limits allow this take, their spending, and the take's end.
--
-- The rate limit is a generic cell rate algorithm on one clock (Redis', ARGV[8] of _take.lua):
-- each entry taken moves the arrival time 1/rate on; a take may run up to `burst` tokens ahead
-- of now. Over any window of T seconds, at most rate * T + burst entries are taken. A reclaimed
-- group (after a worker died) is taken whole once a take may have one entry: the arrival time
-- then runs further ahead, and later takes wait that much longer. A worker that dies holding
-- entries took their tokens; nothing is given back, so nothing can leak. If Redis loses its
-- data, the limits start over. max_in_flight counts the checks each worker says it is running
-- (K.running): a worker's share is the room the others leave, at most its fair share.

-- Now in microseconds: the test's clock if it set one (A.now), else the Redis clock, read with
-- TIME, the one clock every worker's host shares for the limits' state.
local function clock_us()
  if A.now ~= '' then return tonumber(A.now) end
  local clock = redis.call('TIME')
  return tonumber(clock[1]) * 1000000 + tonumber(clock[2])
end

-- Returns the grant, the wait (0, milliseconds until tokens are due, or -1: until checks end),
-- and the rate's state: now, arrival, ahead (us).
local function grant()
  local limit, rate, burst, most = A.limit, A.rate, A.burst, A.most
  local cap, wait = limit, 0
  local now, arrival, ahead = 0, 0, 0
  if rate > 0 then
    now = clock_us()
    arrival = math.max(tonumber(redis.call('GET', K.rate) or 0), now)
    ahead = burst * 1000000 / rate  -- how far ahead of now the arrival time may run
  end
  if (rate > 0 or most > 0) and limit > 0 then
    local sharers = math.max(redis.call('SCARD', K.workers), 1)
    if rate > 0 then
      local share = math.max(math.ceil(burst / sharers), 1)
      local tokens = math.floor((now + ahead - arrival) * rate / 1000000)
      cap = math.min(cap, math.max(tokens, 0), share)
      if cap == 0 then
        local want = math.min(limit, share)
        wait = math.max(math.ceil((arrival + want * 1000000 / rate - ahead - now) / 1000), 1)
      end
    end
    if most > 0 then
      local others = 0
      local counts = redis.call('HGETALL', K.running)
      for i = 1, #counts, 2 do
        if counts[i] ~= A.worker then others = others + tonumber(counts[i + 1]) end
      end
      local mine = math.max(math.ceil(most / sharers), 1)  -- no worker keeps the others out
      local room = math.min(most - others, mine) - A.running
      if room <= 0 and wait == 0 then wait = -1 end
      cap = math.max(math.min(cap, room), 0)
    end
  end
  return cap, wait, now, arrival, ahead
end

-- The take's tokens and room are spent: the arrival time moves on, the worker's count is set.
local function spend(taken, now, arrival, ahead)
  if A.rate > 0 and #taken > 0 then
    arrival = arrival + #taken * 1000000 / A.rate
    redis.call('SET', K.rate, string.format('%.0f', arrival), 'PX', math.ceil((arrival - now + ahead) / 1000) + 1000)
  end
  if A.most > 0 then
    if A.running + #taken > 0 then
      redis.call('HSET', K.running, A.worker, A.running + #taken)
    else
      redis.call('HDEL', K.running, A.worker)
    end
  end
end

-- The take's end: the entries held, the limits spent, one more idle worker woken when `more`
-- entries wait (each woken worker wakes the next), and the reply (_take.lua's header).
local function finish(taken, suspect, wait, held_back, now, arrival, ahead, more)
  if #taken > 0 then chunked('SADD', K.processing, taken) end
  spend(taken, now, arrival, ahead)
  if more then wake_one(K.wake) end
  local settled = ''
  if #taken == 0 then
    settled = redis.call('GET', K.ordering) or ''
    if settled == A.ordering then settled = '' end
  end
  return {suspect, taken, redis.call('LLEN', K.suspects), wait, held_back and '=' .. held_back or '', settled}
end
