-- Take off waiters whose leave (or hand-over) a Redis that lost writes
-- forgot: each (user, join number) is removed only while the user still
-- waits under that very number, so a user who joined again since keeps
-- their new place.
-- KEYS: 1 waitlist
-- ARGV: user, join number, user, join number, ...
-- Returns how many waiters were taken off.
local n = 0
for i = 1, #ARGV, 2 do
  local score = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if score and tonumber(score) == tonumber(ARGV[i + 1]) then
    redis.call('ZREM', KEYS[1], ARGV[i])
    n = n + 1
  end
end
return n
