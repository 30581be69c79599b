-- Rebuild a drifted Redis stock from the database, only if nothing moved
-- since reconciliation read it: the stock and the hold counter are as seen.
-- The stock additions the database snapshot included are marked applied,
-- so an addition's late Redis step does not add its units a second time.
-- KEYS: 1 stock, 2 reserved, 3 released, 4 applied additions (set)
-- ARGV: 1 expected stock, 2 expected reserved, 3 new stock, 4.. addition refs
-- Returns 1 when set, 0 when something moved.
if tonumber(redis.call('GET', KEYS[1]) or '-1') ~= tonumber(ARGV[1]) then
  return 0
end
if tonumber(redis.call('GET', KEYS[2]) or '0') ~= tonumber(ARGV[2]) then
  return 0
end
redis.call('SET', KEYS[1], ARGV[3])
for i = 4, #ARGV do
  redis.call('SADD', KEYS[4], ARGV[i])
end
redis.call('INCR', KEYS[3])
return 1
