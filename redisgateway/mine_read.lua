-- Read what Redis knows of a user's reservations of a sale, for
-- GET /api/v1/me/reservations: the user's tokens in hold order (the user
-- index reserve.lua appends to), each with its hold state and its status
-- record of the sale's current epoch (see status_read.lua).
-- The index is complete only when warm-up started it on a sale with no
-- reservation in this epoch (its '_epoch' = the sale's epoch), the sale is
-- in Redis mode and every hold was indexed (its '_holds' = the reserved
-- counter; a reserve script of an older release takes holds without
-- indexing them, and a lost index or counter makes them differ). A rebuild
-- after a database-mode episode or lost keys sets a new epoch, so the
-- index is incomplete from then on.
-- Several users in one call let concurrent reads share a round trip.
-- KEYS: 1 meta, 2 reserved, 3 user index, 4 tokens, 5 status hash,
--       6 retired users (their ended tokens left the index: retire.lua)
-- ARGV: the user ids
-- A user who took more holds than the index's cap is marked '*' (see
-- reserve.lua), and a retired user, are not listed by the index.
-- Returns {'0'} when the index is incomplete, else {'1'} followed, for
-- each user in turn, by the number n of the user's tokens and n triples
-- token, state or '', record or '' (oldest first); n is -1 for a user the
-- index does not list.
local m = redis.call('HMGET', KEYS[1], 'epoch', 'mode')
local idx = redis.call('HMGET', KEYS[3], '_epoch', '_holds')
local reserved = redis.call('GET', KEYS[2]) or '0'
if not m[1] or m[2] ~= 'redis' or idx[1] ~= m[1] or tonumber(idx[2] or '-1') ~= tonumber(reserved) then
  return {'0'}
end
local out = {'1'}
for i = 1, #ARGV do
  local at = #out + 1
  local n = 0
  out[at] = '0'
  local mine = redis.call('HGET', KEYS[3], ARGV[i])
  if mine == '*' or redis.call('SISMEMBER', KEYS[6], ARGV[i]) == 1 then
    n = -1
  elseif mine then
    for token in string.gmatch(mine, '[^,]+') do
      local rec = redis.call('HGET', KEYS[5], token) or ''
      if rec ~= '' and string.match(rec, '^%d+|(%d+)|') ~= m[1] then
        rec = ''
      end
      out[#out + 1] = token
      out[#out + 1] = redis.call('HGET', KEYS[4], token) or ''
      out[#out + 1] = rec
      n = n + 1
    end
  end
  out[at] = tostring(n)
end
return out
