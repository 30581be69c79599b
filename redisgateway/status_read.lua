-- Read what Redis knows of reservations of one sale for status reads: each
-- token's hold state and its status record, the record only while it
-- belongs to the sale's current epoch (see status.lua). Several tokens in
-- one call let concurrent reads share a round trip.
-- KEYS: 1 tokens, 2 status hash, 3 meta
-- ARGV: the tokens
-- Returns {state, record} per token, flat: the token state ("state:user")
-- or '', the record or ''.
local epoch = redis.call('HGET', KEYS[3], 'epoch')
local out = {}
for i = 1, #ARGV do
  local state = redis.call('HGET', KEYS[1], ARGV[i]) or ''
  local rec = redis.call('HGET', KEYS[2], ARGV[i])
  if not rec or not epoch or string.match(rec, '^%d+|(%d+)|') ~= epoch then
    rec = ''
  end
  out[2 * i - 1] = state
  out[2 * i] = rec
end
return out
