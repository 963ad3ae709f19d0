-- errors.lua: count a batch's failures by error, for status and the dashboard (no table scan).
-- KEYS[1]  errors  HASH  normalised message -> cjson {count, first, last, examples}
-- ARGV[1]  now (Unix seconds)
-- ARGV[2]  most groups kept; failures of further messages count under "(other errors)"
-- ARGV[3]  most example ids kept per group (the latest)
-- ARGV[4..] groups, three values each: message, how many failed, example ids (a JSON array)
-- Returns  nothing. Groups not seen for a day are pruned by the orphans job (store.prune_errors).
local now, most, examples_kept = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
for i = 4, #ARGV, 3 do
  local message, count = ARGV[i], tonumber(ARGV[i + 1])
  local raw = redis.call('HGET', KEYS[1], message)
  if not raw and redis.call('HLEN', KEYS[1]) >= most then
    message = '(other errors)'
    raw = redis.call('HGET', KEYS[1], message)
  end
  local group = raw and cjson.decode(raw) or {count = 0, first = now, examples = {}}
  group.count = group.count + count
  group.last = now
  for _, example in ipairs(cjson.decode(ARGV[i + 2])) do
    table.insert(group.examples, example)
  end
  while #group.examples > examples_kept do table.remove(group.examples, 1) end
  redis.call('HSET', KEYS[1], message, cjson.encode(group))
end
return 0
