-- Move a token's state forward (held -> ordered -> paid), only from the
-- states given, so a late or repeated call cannot move it back.
-- Every call bumps the fence (see release.lua).
-- KEYS: 1 tokens, 2 fence
-- ARGV: 1 token, 2 new state, 3.. states it may move from
-- Returns 1 when moved, 0 otherwise.
redis.call('INCR', KEYS[2])
local v = redis.call('HGET', KEYS[1], ARGV[1])
if not v then
  return 0
end
local state, user = string.match(v, '^(%a+):(%d+)$')
for i = 3, #ARGV do
  if state == ARGV[i] then
    redis.call('HSET', KEYS[1], ARGV[1], ARGV[2] .. ':' .. user)
    return 1
  end
end
return 0
