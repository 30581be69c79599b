-- Move a token's state forward (held -> ordered -> paid), only from the
-- states given, so a late or repeated call cannot move it back.
-- Every call bumps the fence and appends "fence|token|state" to the step
-- journal, also when it finds nothing to do (the token Redis does not have
-- yet): a rebuild whose database snapshot may predate this step applies it
-- (see rebuild.lua). The journal keeps the last ARGV[3] entries.
-- KEYS: 1 tokens, 2 fence, 3 step journal
-- ARGV: 1 token, 2 new state, 3 journal length kept, 4.. states it may move from
-- Returns 1 when moved, 0 otherwise.
local fence = redis.call('INCR', KEYS[2])
redis.call('RPUSH', KEYS[3], fence .. '|' .. ARGV[1] .. '|' .. ARGV[2])
redis.call('LTRIM', KEYS[3], -tonumber(ARGV[3]), -1)
local v = redis.call('HGET', KEYS[1], ARGV[1])
if not v then
  return 0
end
local state, user = string.match(v, '^(%a+):(%d+)$')
for i = 4, #ARGV do
  if state == ARGV[i] then
    redis.call('HSET', KEYS[1], ARGV[1], ARGV[2] .. ':' .. user)
    return 1
  end
end
return 0
