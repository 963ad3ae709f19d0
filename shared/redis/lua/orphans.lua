-- orphans.lua: release in-flight ids that nothing holds any more (a safety net).
-- KEYS[1]  inflight    HASH  id -> due_ms
-- KEYS[2]  queue       LIST
-- KEYS[3]  suspects    LIST  groups of entries ("e1 e2 ...")
-- KEYS[4]  quarantine  HASH
-- KEYS[5]  stats       HASH  counter "orphans"
-- KEYS[6]  workers     SET   registered workers; must equal the worker ids in ARGV
-- KEYS[7]  priority    LIST  the priority rows' queue (dispatch.lua)
-- KEYS[8..] the group keys (GROUP_KEYS of them, _lib.lua group_keys): entries waiting in a group's lists are held;
--          a released id's entry gives its group's room back
-- KEYS[8 + GROUP_KEYS..] processing SET and landing LIST of each of those workers, in pairs
-- ARGV[1]  N, the number of candidates that follow as id, due_ms pairs (in flight for a due
--          time older than the caller's cutoff, found by HSCAN)
-- ARGV[2 .. 1+2N]  the candidates; ARGV[2+2N ..] the worker ids the caller read from KEYS[6]
-- Returns  the released ids, or -1 if the set of workers changed meanwhile (call again).
-- Only a lost write (or a worker of an earlier version dying between its blocking BLMOVE and its
-- next pop: the landing lists) can leave such ids;
-- without this they would block their rows from dispatch forever.
-- #include _group_release

local n = tonumber(ARGV[1])
local workers = {}
for i = 2 + 2 * n, #ARGV do workers[#workers + 1] = ARGV[i] end
if redis.call('SCARD', KEYS[6]) ~= #workers then return -1 end
for _, w in ipairs(workers) do
  if redis.call('SISMEMBER', KEYS[6], w) == 0 then return -1 end
end
if n == 0 then return {} end
local present = {}
local function mark(entries)
  for _, entry in ipairs(entries) do
    for one in string.gmatch(entry, '%S+') do
      local id = id_of(one)
      if id then present[id] = true end
    end
  end
end
mark(redis.call('LRANGE', KEYS[2], 0, -1))
mark(redis.call('LRANGE', KEYS[3], 0, -1))
mark(redis.call('LRANGE', KEYS[7], 0, -1))
for _, id in ipairs(redis.call('HKEYS', KEYS[4])) do present[id] = true end
local g = group_keys(8)
local names = redis.call('LRANGE', g.ring, 0, -1)
for _, name in ipairs(redis.call('ZRANGE', g.sleeping, 0, -1)) do names[#names + 1] = name end
for _, name in ipairs(redis.call('SMEMBERS', g.full)) do names[#names + 1] = name end
for _, name in ipairs(names) do mark(redis.call('LRANGE', g.prefix .. name, 0, -1)) end
for _, name in ipairs(redis.call('SMEMBERS', g.urgent)) do mark(redis.call('LRANGE', urgent_list(g, name), 0, -1)) end
for k = 8 + GROUP_KEYS, #KEYS, 2 do
  mark(redis.call('SMEMBERS', KEYS[k]))
  mark(redis.call('LRANGE', KEYS[k + 1], 0, -1))
end
local released, entries = {}, {}
for i = 2, 1 + 2 * n, 2 do
  local id, due = ARGV[i], ARGV[i + 1]
  if not present[id] and redis.call('HGET', KEYS[1], id) == due then
    redis.call('HDEL', KEYS[1], id)
    released[#released + 1] = id
    entries[#entries + 1] = id .. ':' .. due
  end
end
group_release(g, entries)
if #released > 0 then redis.call('HINCRBY', KEYS[5], 'orphans', #released) end
return released
