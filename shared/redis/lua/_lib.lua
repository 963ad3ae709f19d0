-- _lib.lua: helpers prepended to every recheck script by shared/redis/store.py.
-- Entries are "id:due_ms" strings; unpack() is limited by Lua's C stack, so multi-argument
-- commands are sent in chunks.

local CHUNK = 1000

local function id_of(entry)
  local colon = string.find(entry, ':', 1, true)
  if not colon then return nil end
  return string.sub(entry, 1, colon - 1)
end

-- redis.call(command, key, prefix..., items...) in chunks; returns the replies in order.
local function chunked(command, key, items, prefix)
  local replies = {}
  for start = 1, #items, CHUNK do
    local args = {}
    if prefix then for _, p in ipairs(prefix) do args[#args + 1] = p end end
    for i = start, math.min(start + CHUNK - 1, #items) do args[#args + 1] = items[i] end
    replies[#replies + 1] = redis.call(command, key, unpack(args))
  end
  return replies
end

