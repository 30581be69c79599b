-- Join a sale's waitlist, or read the place of a user already on it.
-- KEYS: 1 waitlist (user -> join number), 2 the last join number, 3 buyers
-- ARGV: 1 user_id
-- A join number is Redis's clock in microseconds, kept strictly above the
-- last one: it only grows, even after the sale's keys were lost, so it
-- names one join for ever (the hand-over's request id, WaitlistRequestID).
-- Returns {the 1-based position, the join number}, or {-1, 0} when the
-- user holds a live or paid unit of the sale (a buyer mark).
if redis.call('SISMEMBER', KEYS[3], ARGV[1]) == 1 then
  return {-1, 0}
end
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  local t = redis.call('TIME')
  local n = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local last = tonumber(redis.call('GET', KEYS[2]) or '0')
  if n <= last then
    n = last + 1
  end
  local joined = string.format('%.0f', n)
  redis.call('SET', KEYS[2], joined)
  redis.call('ZADD', KEYS[1], joined, ARGV[1])
end
-- The number as a string: a Lua number past 2^53 would lose digits.
return {redis.call('ZRANK', KEYS[1], ARGV[1]) + 1, redis.call('ZSCORE', KEYS[1], ARGV[1])}
