-- Add units to a sale's Redis stock or withdraw unsold ones; never below zero.
-- Adding bumps the release counter, so instances drop their sold-out mark.
-- An addition with a ref is applied once: a stock repair or rebuild that
-- set the stock from a database snapshot including it marked it already.
-- KEYS: 1 stock, 2 released counter, 3 applied additions (set)
-- ARGV: 1 delta, 2 ref ('' for none)
-- Returns {outcome, stock}.
local stock = redis.call('GET', KEYS[1])
if not stock then
  return {'not_ready', -1}
end
local ref = ARGV[2] or ''
if ref ~= '' and tonumber(ARGV[1]) > 0 then
  if redis.call('SADD', KEYS[3], ref) == 0 then
    return {'already', tonumber(stock)}
  end
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
