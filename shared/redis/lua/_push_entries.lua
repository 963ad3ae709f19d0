-- _push_entries.lua (included by dispatch.lua): the entries of a push, parsed; a queued entry
-- moved up for a head push (a grouped chunk's pushes: _group_push.lua).

-- ARGV[start..stop] as ids, due times, entries as queued ("id:due_ms") and groups (nil for an
-- entry of a workload without groups; a grouped entry is "id:due_ms:hexgroup").
local function parse_entries(start, stop)
  local ids, dues, entries, names = {}, {}, {}, {}
  local n = 0
  for i = start, stop do
    local entry = ARGV[i]
    local colon = find(entry, ':', 1, true)
    local second = find(entry, ':', colon + 1, true)
    n = n + 1
    ids[n] = sub(entry, 1, colon - 1)
    if second then  -- a grouped entry: its group is not part of what is queued
      dues[n] = sub(entry, colon + 1, second - 1)
      entries[n] = sub(entry, 1, second - 1)
      names[n] = sub(entry, second + 1)
    else
      dues[n] = sub(entry, colon + 1)
      entries[n] = entry
    end
  end
  return ids, dues, entries, names, n
end

-- A head push of an entry queued for the same due time: found among the last `scan` entries of
-- its list, it is taken out. Returns 'group' (put back at the head of its group's list: it
-- waited behind its group's own), 'moved' (the caller pushes it to the head of `into`), or nil
-- (not found: further back, or held by a worker).
local function move_up(entry, name, scan, into)
  if name then
    local list = G.prefix .. name
    if not redis.call('LPOS', list, entry, 'RANK', -1, 'MAXLEN', scan) then return nil end
    redis.call('LREM', list, -1, entry)
    redis.call('LPUSH', list, entry)
    return 'group'
  end
  local from = redis.call('LPOS', K.queue, entry, 'RANK', -1, 'MAXLEN', scan) and K.queue
  if not from and into == K.priority and redis.call('LPOS', K.priority, entry, 'RANK', -1, 'MAXLEN', scan) then
    from = K.priority
  end
  if not from then return nil end
  redis.call('LREM', from, -1, entry)
  return 'moved'
end
