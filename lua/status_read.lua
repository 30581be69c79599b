-- Read what Redis knows of a reservation for a status read: the token's
-- hold state and its status record, the record only while it belongs to
-- the sale's current epoch (see status.lua).
-- KEYS: 1 tokens, 2 status hash, 3 meta
-- ARGV: 1 token
-- Returns {token state ("state:user") or '', record or ''}.
local state = redis.call('HGET', KEYS[1], ARGV[1]) or ''
local rec = redis.call('HGET', KEYS[2], ARGV[1])
if not rec then
  return {state, ''}
end
local epoch = redis.call('HGET', KEYS[3], 'epoch')
local recEpoch = string.match(rec, '^%d+|(%d+)|')
if not epoch or recEpoch ~= epoch then
  return {state, ''}
end
return {state, rec}
