-- Rebuild a sale in Redis from the database after an outage, in one step:
-- stock net of holds, buyer set, token states, replay keys, epoch and mode.
-- Holds Redis has that the database does not know yet (inbox entries whose
-- workflow has not recorded them) are kept, and their units stay held:
-- found as held tokens, or, when the tokens hash was lost with other keys,
-- as inbox entries no token state explains.
-- A release or advance whose database write committed after the snapshot
-- may have run its Redis step before this script; the rebuild would undo
-- it. Each such step bumps the fence, so the rebuild refuses (-1) when the
-- fence moved since the caller read it before its snapshot, and the caller
-- starts over; a step that runs after this script finds the rebuilt token.
-- KEYS: 1 meta, 2 stock, 3 buyers, 4 tokens, 5 requests, 6 reserved, 7 released,
--       8 inbox, 9 fence, 10 applied additions (set), 11 the sale's event
--       channel (not a key: passed here for its slot; announces the new
--       epoch to the API instances' status caches)
-- ARGV: 1 JSON {stock, epoch, starts_ms, ends_ms, control, group, fence, buyers: [user],
--               tokens: {token: "state:user"}, requests: {"user:request_id": token}}
-- Returns the stock set, or -1 when the fence moved.
local data = cjson.decode(ARGV[1])
if tonumber(redis.call('GET', KEYS[9]) or '0') ~= tonumber(data.fence) then
  return -1
end
local stock = tonumber(data.stock)
local old = redis.call('HGETALL', KEYS[4])
local kept = {}
for i = 1, #old, 2 do
  local token, v = old[i], old[i + 1]
  local state, user = string.match(v, '^(%a+):(%d+)$')
  if state == 'held' and data.tokens[token] == nil then
    kept[token] = v
    table.insert(data.buyers, user)
    stock = stock - 1
  end
end
if redis.call('EXISTS', KEYS[8]) == 1 then
  for _, e in ipairs(redis.call('XRANGE', KEYS[8], '-', '+')) do
    local f = e[2]
    local fields = {}
    for i = 1, #f, 2 do
      fields[f[i]] = f[i + 1]
    end
    local token, user, request = fields['token'], fields['user'], fields['request']
    if token and user and data.tokens[token] == nil and kept[token] == nil
        and redis.call('HEXISTS', KEYS[4], token) == 0 then
      kept[token] = 'held:' .. user
      table.insert(data.buyers, user)
      if request then
        data.requests[user .. ':' .. request] = token
      end
      stock = stock - 1
    end
  end
end
if stock < 0 then
  stock = 0
end
redis.call('DEL', KEYS[3], KEYS[4])
for _, user in ipairs(data.buyers) do
  redis.call('SADD', KEYS[3], user)
end
for token, v in pairs(data.tokens) do
  redis.call('HSET', KEYS[4], token, v)
end
for token, v in pairs(kept) do
  redis.call('HSET', KEYS[4], token, v)
end
for field, token in pairs(data.requests) do
  redis.call('HSET', KEYS[5], field, token, 't:' .. token, string.match(field, '^%d+:(.*)$') or '')
end
redis.call('SET', KEYS[2], stock)
for _, ref in ipairs(data.added) do
  redis.call('SADD', KEYS[10], ref)
end
redis.call('HSET', KEYS[1], 'epoch', tostring(data.epoch), 'mode', 'redis',
  'starts_ms', tostring(data.starts_ms), 'ends_ms', tostring(data.ends_ms), 'control', data.control)
local ok, err = pcall(redis.call, 'XGROUP', 'CREATE', KEYS[8], data.group, '0', 'MKSTREAM')
if not ok and not string.find(tostring(err), 'BUSYGROUP') then
  return redis.error_reply(tostring(err))
end
local n = 0
for _ in pairs(data.tokens) do
  n = n + 1
end
if tonumber(redis.call('GET', KEYS[6]) or '0') < n then
  redis.call('SET', KEYS[6], n)
end
redis.call('INCR', KEYS[7])
redis.call('PUBLISH', KEYS[11], '*')
return stock
