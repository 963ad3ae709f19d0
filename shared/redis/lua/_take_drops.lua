-- _take_drops.lua (included by the take scripts): entries marked dropped are left out of a take.
--
-- Entries are dropped, not started, when `now` superseded them (dispatch.lua) or their row was
-- paused while they were queued (Store.drop). Each is dropped once: it leaves K.dropped,
-- releases its id if it still holds it (an id asked for meanwhile is asked again, as ack.lua
-- does), and gives back its group's room if it held some (a reclaimed entry keeps its group's
-- room until it is taken again: dropped then, it never reaches an ack). Testing for them costs
-- one EXISTS per take while there are none; they take no token and no room.
local DROPS_PER_TAKE = 10000  -- a group's visit goes on past at most this many per take

-- The entries of `entries` to start; gone_back(the dropped ones), if given, gives their groups' room
-- back (take_grouped.lua).
local function live(entries, gone_back)
  if #entries == 0 or redis.call('EXISTS', K.dropped) == 0 then return entries end
  local kept, gone = {}, {}
  for start = 1, #entries, CHUNK do
    local stop = math.min(start + CHUNK - 1, #entries)
    local flags = redis.call('SMISMEMBER', K.dropped, unpack(entries, start, stop))
    for i = start, stop do
      local entry = entries[i]
      if flags[i - start + 1] == 1 then
        redis.call('SREM', K.dropped, entry)
        local id = id_of(entry)
        if redis.call('HGET', K.inflight, id) == string.sub(entry, #id + 2) then
          redis.call('HDEL', K.inflight, id)
          if redis.call('HDEL', K.again, id) == 1 then redis.call('RPUSH', K.asked, id) end
        end
        gone[#gone + 1] = entry
      else
        kept[#kept + 1] = entry
      end
    end
  end
  if gone_back then gone_back(gone) end
  return kept
end
