-- Move ended reservations' records out of Redis once the database has their
-- end, so a sale's per-token structures stay bounded by its live holds
-- (KEYS.md). For each token the caller found ended in the database: its
-- token state, replay fields ("user:request_id", "t:token") and status
-- record go, it leaves its user's entry in the user index, and the user
-- joins the retired set: the reserve script asks the database about a
-- request of theirs it does not know, and the database lists their
-- reservations. The index keeps the user's other tokens, so a release
-- that finds no token state (a repeat) still sees a live hold of the user
-- the database has not recorded (release.lua). Only a token still
-- released here (or unknown) and released before ARGV[1]. (A rebuild,
-- which keeps an inbox entry whose token Redis does not know as a live
-- hold, is given the ended reservations the inbox still names.)
-- KEYS: 1 tokens, 2 requests, 3 status records, 4 user index, 5 ended
--       tokens (sorted set, by release time), 6 retired users
-- ARGV: 1 cutoff (Unix ms), 2 n, then n triples token, user, request_id
--       (ended in the database), then tokens to drop from the ended set
--       only (live or unknown in the database: a repair's business)
-- Returns the number of tokens retired.
local before = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
local retired = 0
for i = 3, 2 + 3 * n, 3 do
  local token, user, req = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local at = redis.call('ZSCORE', KEYS[5], token)
  if at and tonumber(at) <= before then
    local v = redis.call('HGET', KEYS[1], token)
    if not v or string.match(v, '^(%a+):') == 'released' then
      redis.call('HDEL', KEYS[1], token)
      redis.call('HDEL', KEYS[3], token)
      redis.call('HDEL', KEYS[2], 't:' .. token)
      local field = user .. ':' .. req
      if redis.call('HGET', KEYS[2], field) == token then
        redis.call('HDEL', KEYS[2], field)
      end
      redis.call('SADD', KEYS[6], user)
      local mine = redis.call('HGET', KEYS[4], user)
      if mine and mine ~= '*' then
        local kept = {}
        for other in string.gmatch(mine, '[^,]+') do
          if other ~= token then
            kept[#kept + 1] = other
          end
        end
        if #kept > 0 then
          redis.call('HSET', KEYS[4], user, table.concat(kept, ','))
        else
          redis.call('HDEL', KEYS[4], user)
        end
      end
      retired = retired + 1
    end
    redis.call('ZREM', KEYS[5], token)
  end
end
for i = 3 + 3 * n, #ARGV do
  redis.call('ZREM', KEYS[5], ARGV[i])
end
return retired
