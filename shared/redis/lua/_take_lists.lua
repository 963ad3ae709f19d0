-- _take_lists.lua (included by the take scripts): a reclaimed group, and pops from lists.

-- Appends up to n entries of a list to taken; returns taken (a new table if it was empty).
local function pop_into(taken, list, n)
  if n <= 0 then return taken end
  local more = redis.call('LPOP', list, n)
  if not more then return taken end
  if #taken == 0 then return more end
  local count = #taken
  for i = 1, #more do taken[count + i] = more[i] end
  return taken
end

-- A reclaimed group (the entries a dead worker held, see reclaim.lua), taken alone, as one batch,
-- before anything from the lists, unless the caller is filling a batch it has begun in another
-- partition (A.no_group). Returns its entries (nil if none).
local function take_suspects(allowed)
  if allowed <= 0 or A.no_group then return nil end
  local group = redis.call('LPOP', K.suspects)
  if not group then return nil end
  local taken = {}
  for entry in string.gmatch(group, '%S+') do taken[#taken + 1] = entry end
  return taken
end
