-- Add units to a sale's Redis stock or withdraw unsold ones; never below zero.
-- Adding bumps the release counter, so instances drop their sold-out mark.
-- KEYS: 1 stock, 2 released counter
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
if tonumber(ARGV[1]) > 0 then
  redis.call('INCR', KEYS[2])
end
return {'ok', after}
