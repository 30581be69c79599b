-- Rebuild a sale in Redis from the database after an outage, in one step:
-- stock net of holds, buyer set, token states, replay keys, epoch and mode.
-- Holds Redis has that the database does not know yet (inbox entries whose
-- workflow has not recorded them) are kept, and their units stay held:
-- found as held tokens, or, when the tokens hash was lost with other keys,
-- as inbox entries no token state explains.
-- Steps that ran in Redis after the caller read the fence (before its
-- database snapshot) are merged, not refused, so a resync under traffic
-- finishes in one pass. A token's state only moves forward (held < ordered
-- < paid < released) and Redis's steps follow the database's writes, so:
-- - a token keeps the higher of the snapshot's state and Redis's (a
--   restore that ran since);
-- - every release and advance appends to the step journal with the fence
--   it bumped, and each one since the caller's fence is applied here to
--   the snapshot's token: an advance raises its state, a release of a live
--   token ends it (the unit back to stock when the release restored it,
--   the mark gone when the user holds nothing else). Only when the journal
--   does not hold every step since (more ran than it keeps) does the
--   rebuild refuse (-1).
-- KEYS: 1 meta, 2 stock, 3 buyers, 4 tokens, 5 requests, 6 reserved, 7 released,
--       8 inbox, 9 fence, 10 applied additions (set), 11 the sale's event
--       channel (not a key: passed here for its slot; announces the new
--       epoch to the API instances' status caches), 12 step journal,
--       13 retired users, 14 ended tokens
-- ARGV: 1 JSON {stock, epoch, starts_ms, ends_ms, control, group, fence, buyers: [user],
--               tokens: {token: "state:user"}, requests: {"user:request_id": token},
--               retired: {user: true}, seq: the highest hold number the database has}
-- The snapshot's ended reservations come as tokens only where Redis still
-- names them (its tokens hash or inbox); the others' users come as
-- retired, so a replay of theirs is answered from the database. Each
-- released token written joins the ended set, which retire.lua empties.
-- Returns the stock set, or -1 when steps since the fence are missing.
local data = cjson.decode(ARGV[1])
local since = tonumber(data.fence)
local steps = {}
local moved = tonumber(redis.call('GET', KEYS[9]) or '0') - since
if moved < 0 then
  return -1
end
if moved > 0 then
  for _, e in ipairs(redis.call('LRANGE', KEYS[12], 0, -1)) do
    local f, token, op = string.match(e, '^(%d+)|([^|]+)|(%w+)$')
    if f and tonumber(f) > since then
      steps[#steps + 1] = {token, op}
    end
  end
  if #steps ~= moved then
    return -1
  end
end
local rank = {held = 1, ordered = 2, paid = 3, released = 4}
local stock = tonumber(data.stock)
local old = redis.call('HGETALL', KEYS[4])
local kept = {}
for i = 1, #old, 2 do
  local token, v = old[i], old[i + 1]
  local state, user = string.match(v, '^(%a+):(%d+)$')
  local want = data.tokens[token]
  if state == 'held' and want == nil then
    kept[token] = v
    table.insert(data.buyers, user)
    stock = stock - 1
  elseif want ~= nil and state ~= 'released' and rank[state] and rank[state] > (rank[string.match(want, '^(%a+)')] or 0) then
    data.tokens[token] = v
  end
end
local gone = {}
for _, step in ipairs(steps) do
  local token, op = step[1], step[2]
  local want = data.tokens[token]
  local state, user = nil, nil
  if want ~= nil then
    state, user = string.match(want, '^(%a+):(%d+)$')
  end
  if state == nil or state == 'released' then
    -- Not a token of this sale's snapshot, or ended there already.
  elseif op == 'r1' or op == 'r0' then
    data.tokens[token] = 'released:' .. user
    gone[user] = true
    if op == 'r1' then
      stock = stock + 1
    end
  elseif rank[op] and rank[op] > rank[state] then
    data.tokens[token] = op .. ':' .. user
  end
end
if next(gone) ~= nil then
  local live = {}
  for _, v in pairs(data.tokens) do
    local state, user = string.match(v, '^(%a+):(%d+)$')
    if state ~= 'released' then
      live[user] = true
    end
  end
  for _, v in pairs(kept) do
    live[string.match(v, ':(%d+)$')] = true
  end
  local buyers = {}
  for _, user in ipairs(data.buyers) do
    if not gone[user] or live[user] then
      buyers[#buyers + 1] = user
    end
  end
  data.buyers = buyers
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
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for token, v in pairs(data.tokens) do
  redis.call('HSET', KEYS[4], token, v)
  if string.match(v, '^(%a+):') == 'released' then
    redis.call('ZADD', KEYS[14], 'NX', now, token)
  end
end
for user in pairs(data.retired) do
  redis.call('SADD', KEYS[13], user)
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
-- The counter of holds never goes back, and starts past every hold number
-- the database recorded (reserve.lua): a hold after the rebuild is new.
n = math.max(n, tonumber(data.seq or 0))
if tonumber(redis.call('GET', KEYS[6]) or '0') < n then
  redis.call('SET', KEYS[6], n)
end
redis.call('INCR', KEYS[7])
redis.call('PUBLISH', KEYS[11], '*')
return stock
