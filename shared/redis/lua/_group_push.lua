-- _group_push.lua (included by dispatch.lua and ack.lua): entries pushed into their groups'
-- lists. With priority (a priority_column too, docs/groups.md), a group's priority rows wait in
-- a list of their own (_lib.lua urgent_list), taken before its other list (_take_groups.lua);
-- g.urgent holds the groups whose priority list holds entries, g.urgent_waiting how many
-- entries those lists hold (counted in g.waiting too). A group whose two lists were both empty
-- joins the ring when a push fills one (the invariant in _lib.lua).

-- Whether a group's priority list is empty; any_urgent false: every group's is.
local function no_urgent(g, name, any_urgent)
  return not any_urgent or redis.call('SISMEMBER', g.urgent, name) == 0
end

-- Entries go to the HEAD of their groups' lists, each pushed in turn (the last one pushed
-- first in its list): to a group's priority list while that holds entries (it is taken first),
-- else to its other list. (A `now`: before whatever waits; an entry given back: an entry does
-- not say which list it came from, a rest's then goes first once, as without groups.)
-- Returns how many went.
local function group_push_head(g, entries, names)
  local any_urgent = redis.call('EXISTS', g.urgent) == 1
  local urgent_n = 0
  for i = 1, #entries do
    local name = names[i]
    if not no_urgent(g, name, any_urgent) then
      redis.call('LPUSH', urgent_list(g, name), entries[i])
      urgent_n = urgent_n + 1
    elseif redis.call('LPUSH', g.prefix .. name, entries[i]) == 1 and no_urgent(g, name, any_urgent) then
      redis.call('RPUSH', g.ring, name)
    end
  end
  if #entries > 0 then redis.call('INCRBY', g.waiting, #entries) end
  if urgent_n > 0 then redis.call('INCRBY', g.urgent_waiting, urgent_n) end
  return #entries
end

-- One RPUSH per group of a chunk, its entries in their order, to the groups' priority lists if
-- urgent (a page of the priority pass), else to their other lists; groups joining the ring
-- join in the order of their first entry.
local function group_push_tail(g, fresh, fresh_names, urgent)
  local by_group, order = {}, {}
  for i, entry in ipairs(fresh) do
    local name = fresh_names[i]
    local mine = by_group[name]
    if not mine then
      mine = {}
      by_group[name] = mine
      order[#order + 1] = name
    end
    mine[#mine + 1] = entry
  end
  local any_urgent = urgent or redis.call('EXISTS', g.urgent) == 1
  local joining, now_urgent = {}, {}
  for _, name in ipairs(order) do
    local mine = by_group[name]
    local list = urgent and urgent_list(g, name) or g.prefix .. name
    if redis.call('RPUSH', list, unpack(mine)) == #mine then  -- the list was empty
      if urgent then now_urgent[#now_urgent + 1] = name end
      local other_empty = urgent and redis.call('EXISTS', g.prefix .. name) == 0
      if other_empty or (not urgent and no_urgent(g, name, any_urgent)) then joining[#joining + 1] = name end
    end
  end
  if #now_urgent > 0 then redis.call('SADD', g.urgent, unpack(now_urgent)) end
  if #joining > 0 then redis.call('RPUSH', g.ring, unpack(joining)) end
  redis.call('INCRBY', g.waiting, #fresh)
  if urgent then redis.call('INCRBY', g.urgent_waiting, #fresh) end
end
