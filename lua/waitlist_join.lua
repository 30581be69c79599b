-- Join a sale's waitlist, or read the place of a user already on it.
-- KEYS: 1 waitlist (user -> join number), 2 join counter, 3 buyers
-- ARGV: 1 user_id
-- Returns the 1-based position, or -1 when the user holds a live or paid
-- unit of the sale (a buyer mark).
if redis.call('SISMEMBER', KEYS[3], ARGV[1]) == 1 then
  return -1
end
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  redis.call('ZADD', KEYS[1], redis.call('INCR', KEYS[2]), ARGV[1])
end
return redis.call('ZRANK', KEYS[1], ARGV[1]) + 1
