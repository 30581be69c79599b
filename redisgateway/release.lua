-- Release a token's hold: only from held or ordered, so a second run (a
-- retry, a repair, a release that was retrying during an outage) does
-- nothing. Stock comes back only when asked: a hold whose order never took a
-- unit from the database must not add one to Redis.
-- Every call bumps the fence and appends "fence|token|r<restore>" to the
-- step journal, also when it finds nothing to do: a rebuild whose database
-- snapshot may predate this release applies it (see rebuild.lua). The
-- journal keeps the last ARGV[5] entries.
-- The buyer mark goes only when the user holds no other live unit: not
-- one the database knows (ARGV[4], read by the caller), nor one of the
-- user's tokens in the user index that is held, ordered or paid (a hold
-- the database may not have recorded yet). A user who holds another unit
-- must not be able to buy again.
-- Ended tokens join the ended set with Redis's clock, so their records
-- move out once the database has their end (retire.lua).
-- KEYS: 1 stock, 2 buyers, 3 tokens, 4 released counter, 5 fence,
--       6 user index, 7 step journal, 8 ended tokens (sorted set)
-- ARGV: 1 token, 2 user_id, 3 restore stock ('1' or '0'), 4 keep the buyer
--       mark ('1': the database knows another live reservation of the user),
--       5 journal length kept
-- Returns 1 when released now, 0 when there was nothing to release.
local fence = redis.call('INCR', KEYS[5])
redis.call('RPUSH', KEYS[7], fence .. '|' .. ARGV[1] .. '|r' .. ARGV[3])
redis.call('LTRIM', KEYS[7], -tonumber(ARGV[5]), -1)
local v = redis.call('HGET', KEYS[3], ARGV[1])
local state = v and string.match(v, '^(%a+)')
if v and state ~= 'held' and state ~= 'ordered' then
  return 0
end
-- A token Redis lost (a write-losing fault) has nothing to release, but
-- its user's buyer mark may be there still (a later hold of the user set
-- it again): it goes like any release's.
local holdsAnother = ARGV[4] == '1'
if not holdsAnother then
  local mine = redis.call('HGET', KEYS[6], ARGV[2])
  if mine and mine ~= '*' then
    for other in string.gmatch(mine, '[^,]+') do
      local ov = other ~= ARGV[1] and redis.call('HGET', KEYS[3], other)
      local ostate = ov and string.match(ov, '^(%a+)')
      if ostate == 'held' or ostate == 'ordered' or ostate == 'paid' then
        holdsAnother = true
        break
      end
    end
  end
end
if not holdsAnother then
  redis.call('SREM', KEYS[2], ARGV[2])
end
-- A token released now, or one Redis does not know (lost, or retired
-- already: a repeated release may write its status record again), joins
-- the ended set, so what is left of it moves out (retire.lua).
local t = redis.call('TIME')
redis.call('ZADD', KEYS[8], 'NX', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), ARGV[1])
if not v then
  return 0
end
if ARGV[3] == '1' then
  redis.call('INCR', KEYS[1])
end
redis.call('HSET', KEYS[3], ARGV[1], 'released:' .. ARGV[2])
redis.call('INCR', KEYS[4])
return 1
