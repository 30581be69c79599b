-- Put back the replay key of a user's live reservation that a Redis which
-- lost writes forgot: the database refused a new request of the user's
-- (they hold that reservation), so a repeat of the reservation's own
-- request must get its token, not a refusal. Only fields that are missing
-- are written (the mapping is a fact: a request names one token for ever),
-- and only while Redis holds the sale (no meta: the rebuild writes them).
-- KEYS: 1 meta, 2 requests
-- ARGV: 1 "user:request_id", 2 token, 3 request_id
-- Returns 1 when a field was missing, else 0.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
local n = redis.call('HSETNX', KEYS[2], ARGV[1], ARGV[2])
if redis.call('HGET', KEYS[2], ARGV[1]) ~= ARGV[2] then
  return 0
end
n = n + redis.call('HSETNX', KEYS[2], 't:' .. ARGV[2], ARGV[3])
if n > 0 then
  return 1
end
return 0
