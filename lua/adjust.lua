-- Add units to a sale's Redis stock or withdraw unsold ones; never below zero.
-- KEYS: 1 stock
-- ARGV: 1 delta
-- Returns {outcome, stock}.
local stock = redis.call('GET', KEYS[1])
if not stock then
  return {'not_ready', -1}
end
local after = tonumber(stock) + tonumber(ARGV[1])
if after < 0 then
  return {'insufficient', tonumber(stock)}
end
redis.call('SET', KEYS[1], after)
return {'ok', after}
