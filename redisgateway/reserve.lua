-- Reserve one unit of a sale for a user, atomically. Redis runs a script
-- without interleaving, so the check and the decrement cannot race.
-- KEYS: 1 meta, 2 stock, 3 buyers, 4 tokens, 5 requests ("user:request_id" ->
--       token, and "t:token" -> request_id), 6 inbox, 7 reserved,
--       8 user index (field user id, value the user's tokens in hold order,
--       comma separated, at most ARGV[8] of them, or '*' once the user took
--       more; field '_holds' counts every hold: see mine_read.lua),
--       9 waitlist (sorted set: once the sale has sold out, while anyone
--       waits, a unit back in stock is theirs (handover.lua) and an open
--       reservation finds the sale sold out; meta's 'drained' says it sold out),
--       10 retired users (some of their ended reservations' replay fields
--       moved out to the database: retire.lua)
-- ARGV: 1 user_id, 2 request_id, 3 token, 4 epoch the caller believes in,
--       5 deadline (Unix ms; '0' for none),
--       6 (optional) W3C traceparent of the request, 7 (optional) its
--       X-Request-Id: carried in the inbox entry so a workflow the relay
--       starts joins the request's trace and names its request,
--       8 the user index's cap on tokens per user (missing: '0', no list),
--       9 '1' when the waitlist's hand-over reserves (handover.lua),
--       10 '1' when the caller found no reservation of this request in the
--       database (a retired user's request is then not an old one)
-- Returns {outcome, token, stock_left} and, for 'ok', the hold's number
-- (the sale's counter of holds); 'ask' when the request is not in
-- the replay map and the user is retired: the database answers a replay.
local meta = redis.call('HMGET', KEYS[1], 'starts_ms', 'ends_ms', 'control', 'epoch', 'mode', 'drained')
local stock = redis.call('GET', KEYS[2])
-- A missing key is "not warmed", never "zero left".
if not meta[1] or not stock then
  return {'not_ready', '', -1}
end
stock = tonumber(stock)
-- A replay gets its token whatever happened since (sold out, paused, ended).
local reqfield = ARGV[1] .. ':' .. ARGV[2]
local prior = redis.call('HGET', KEYS[5], reqfield)
if prior then
  return {'replay', prior, stock}
end
if ARGV[10] ~= '1' and redis.call('SISMEMBER', KEYS[10], ARGV[1]) == 1 then
  return {'ask', '', stock}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- A script that runs after its caller gave up (Redis was frozen, the call
-- waited in its queue) takes nothing: the caller answered 503, and the
-- database path, which waits out every deadline sent before a switch,
-- may be selling this unit.
local deadline = tonumber(ARGV[5] or '0')
if deadline > 0 and now > deadline then
  return {'late', '', stock}
end
-- Redis's copy of the sale is stale while the database path owns the sale.
if meta[5] ~= 'redis' or meta[4] ~= ARGV[4] then
  return {'not_ready', '', stock}
end
if meta[3] == 'paused' then
  return {'paused', '', stock}
end
if meta[3] == 'stopped' then
  return {'ended', '', stock}
end
-- The authoritative window check runs on Redis's clock, one clock for all.
if now < tonumber(meta[1]) then
  return {'not_started', '', stock}
end
if now >= tonumber(meta[2]) then
  return {'ended', '', stock}
end
if redis.call('SISMEMBER', KEYS[3], ARGV[1]) == 1 then
  return {'already', '', stock}
end
if stock <= 0 then
  if meta[6] ~= '1' then
    redis.call('HSET', KEYS[1], 'drained', '1')
  end
  return {'sold_out', '', stock}
end
if meta[6] == '1' and ARGV[9] ~= '1' and redis.call('ZCARD', KEYS[9]) > 0 then
  return {'sold_out', '', stock}
end
if stock == 1 and meta[6] ~= '1' then
  redis.call('HSET', KEYS[1], 'drained', '1')
end
redis.call('DECR', KEYS[2])
redis.call('SADD', KEYS[3], ARGV[1])
redis.call('HSET', KEYS[4], ARGV[3], 'held:' .. ARGV[1])
-- The request by token too ('t:' fields), so a cancel finds it without
-- scanning the map.
redis.call('HSET', KEYS[5], reqfield, ARGV[3], 't:' .. ARGV[3], ARGV[2])
-- The sale's hold counter numbers the hold: the database keeps the number
-- under a unique key, so a Redis that went back in time (lost writes) is
-- noticed at its next hold, whose number the database has seen.
local seq = redis.call('INCR', KEYS[7])
-- A user past the cap is marked '*' (the database lists them), so the
-- string this rebuilds stays short however often the user churns.
local mine = redis.call('HGET', KEYS[8], ARGV[1])
if mine ~= '*' then
  local n = 1
  if mine then
    local _, commas = string.gsub(mine, ',', '')
    n = commas + 2
    mine = mine .. ',' .. ARGV[3]
  else
    mine = ARGV[3]
  end
  if n > tonumber(ARGV[8] or '0') then
    mine = '*'
  end
  redis.call('HSET', KEYS[8], ARGV[1], mine)
end
redis.call('HINCRBY', KEYS[8], '_holds', 1)
local entry = {'token', ARGV[3], 'user', ARGV[1], 'request', ARGV[2]}
if ARGV[6] and ARGV[6] ~= '' then
  entry[#entry + 1] = 'tp'
  entry[#entry + 1] = ARGV[6]
end
if ARGV[7] and ARGV[7] ~= '' then
  entry[#entry + 1] = 'rid'
  entry[#entry + 1] = ARGV[7]
end
redis.call('XADD', KEYS[6], '*', unpack(entry))
return {'ok', ARGV[3], stock - 1, seq}
