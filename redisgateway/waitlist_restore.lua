-- Put back joins a Redis that lost writes forgot, at their places: each
-- (user, join number) the database kept is added unless the user is on the
-- waitlist already or holds a unit (a buyer mark), and the last join number
-- is raised to the highest, so later joins still come after them.
-- KEYS: 1 waitlist, 2 the last join number, 3 buyers
-- ARGV: user, join number, user, join number, ...
-- Returns how many joins were put back.
local n = 0
local last = tonumber(redis.call('GET', KEYS[2]) or '0')
for i = 1, #ARGV, 2 do
  local user, joined = ARGV[i], tonumber(ARGV[i + 1])
  if redis.call('SISMEMBER', KEYS[3], user) == 0 and not redis.call('ZSCORE', KEYS[1], user) then
    redis.call('ZADD', KEYS[1], joined, user)
    n = n + 1
  end
  if joined > last then
    last = joined
  end
end
redis.call('SET', KEYS[2], string.format('%.0f', last))
return n
