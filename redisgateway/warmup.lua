-- Load a sale into Redis: metadata, stock, buyers and the inbox's consumer
-- group, in one step. Refused once the sale has taken a reservation, so a
-- repeated warm-up can never reset what Redis holds.
-- KEYS: 1 meta, 2 stock, 3 buyers, 4 reserved, 5 inbox, 6 user index,
--       7 the sale's event channel (not a key: passed for its slot; a new
--       epoch is announced to the API instances' status caches)
-- ARGV: 1 starts_ms, 2 ends_ms, 3 control, 4 epoch, 5 mode, 6 stock,
--       7 consumer group, 8.. user ids of live orders
-- Returns {outcome, stock, changed}: changed is 0 when Redis already held
-- exactly this sale (a warm-up repeated), which is then neither rewritten
-- nor announced.
local reserved = tonumber(redis.call('GET', KEYS[4]) or '0')
if reserved > 0 then
  return {'already_live', tonumber(redis.call('GET', KEYS[2]) or '0'), 0}
end
local function held()
  if redis.call('GET', KEYS[2]) ~= ARGV[6] then
    return false
  end
  local meta = redis.call('HMGET', KEYS[1], 'starts_ms', 'ends_ms', 'control', 'epoch', 'mode')
  for i = 1, 5 do
    if meta[i] ~= ARGV[i] then
      return false
    end
  end
  if redis.call('SCARD', KEYS[3]) ~= #ARGV - 7 then
    return false
  end
  for i = 8, #ARGV do
    if redis.call('SISMEMBER', KEYS[3], ARGV[i]) == 0 then
      return false
    end
  end
  if ARGV[5] == 'redis' and #ARGV < 8 then
    local idx = redis.call('HMGET', KEYS[6], '_epoch', '_holds')
    return redis.call('HLEN', KEYS[6]) == 2 and idx[1] == ARGV[4] and idx[2] == '0'
  end
  return redis.call('EXISTS', KEYS[6]) == 0
end
local function group()
  local ok, err = pcall(redis.call, 'XGROUP', 'CREATE', KEYS[5], ARGV[7], '0', 'MKSTREAM')
  if ok then
    return 1
  end
  if string.find(tostring(err), 'BUSYGROUP') then
    return 0
  end
  return redis.error_reply(tostring(err))
end
if held() then
  local created = group()
  if type(created) == 'table' then
    return created
  end
  return {'ok', tonumber(ARGV[6]), created}
end
redis.call('DEL', KEYS[3])
for i = 8, #ARGV do
  redis.call('SADD', KEYS[3], ARGV[i])
end
redis.call('HSET', KEYS[1], 'starts_ms', ARGV[1], 'ends_ms', ARGV[2], 'control', ARGV[3], 'epoch', ARGV[4], 'mode', ARGV[5])
-- The user index (see reserve.lua, mine_read.lua) lists every reservation
-- of this epoch from here on only when the sale has none yet: no hold in
-- Redis (checked above), no live order, Redis mode.
redis.call('DEL', KEYS[6])
if ARGV[5] == 'redis' and #ARGV < 8 then
  redis.call('HSET', KEYS[6], '_epoch', ARGV[4], '_holds', 0)
end
redis.call('SET', KEYS[2], ARGV[6])
local created = group()
if type(created) == 'table' then
  return created
end
redis.call('PUBLISH', KEYS[7], '*')
return {'ok', tonumber(ARGV[6]), 1}
