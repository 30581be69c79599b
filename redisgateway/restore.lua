-- Put a live order's token state and buyer mark back after a fault lost
-- them (Redis restarted without its AOF's last second): its user must not
-- buy twice, and its release must find the token to release.
-- The caller read the fence before reading the order from the database:
-- a release that committed after that read runs its Redis step either
-- before this script (the fence moved: refuse, the caller reads again) or
-- after it (it finds the token restored and releases it).
-- A sale Redis does not hold (no meta) is left to the rebuild.
-- KEYS: 1 meta, 2 tokens, 3 buyers, 4 fence
-- ARGV: 1 token, 2 user_id, 3 state (ordered or paid), 4 fence as read
-- Returns 1 when restored, 0 when nothing was missing, -1 when the fence moved.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
if tonumber(redis.call('GET', KEYS[4]) or '0') ~= tonumber(ARGV[4]) then
  return -1
end
local v = redis.call('HGET', KEYS[2], ARGV[1])
local changed = 0
if not v then
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[3] .. ':' .. ARGV[2])
  changed = 1
else
  local state = string.match(v, '^(%a+)')
  if state ~= 'held' and state ~= 'ordered' and state ~= 'paid' then
    return 0
  end
end
changed = changed + redis.call('SADD', KEYS[3], ARGV[2])
if changed == 0 then
  return 0
end
-- A rebuild running meanwhile keeps the restored state (it takes the
-- higher of its own and Redis's) and the mark of every live token.
return 1
