-- Hand units in stock to the sale's waitlist, longest waiting first. The
-- caller prepends reserve.lua as the function reserve(KEYS, ARGV) (see
-- waitlist.go), so a hand-over is exactly the reservation a 202 answers:
-- stock, buyer mark, token, replay map, user index and inbox entry.
-- KEYS: 1-10 the reserve script's (9 the waitlist)
-- ARGV: 1 epoch the caller believes in, 2 the user index's cap, then for
--       each candidate in waitlist order: user, request_id, token, skip
--       ('1': blacklisted, leaves without a unit)
-- A candidate is served only while it heads the waitlist; the hand-over
-- stops at the first that does not (someone left or joined: the caller
-- reads again), at no stock, and when the sale does not sell (not started,
-- ended, paused, another mode or epoch). A user who holds a live or paid
-- unit leaves without a second one.
-- Nothing is handed over before the sale first sold out (meta 'drained'):
-- until then every unit sells openly, through the challenge and lottery.
-- Returns {user, token, request_id, ...}: each unit handed over, and each
-- waiter who left without one (skipped, or holding a unit) with an empty
-- token, so the caller forgets that join in the database too.
local out = {}
if redis.call('HGET', KEYS[1], 'drained') ~= '1' then
  return out
end
for i = 3, #ARGV, 4 do
  local user, req, tok, skip = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local head = redis.call('ZRANGE', KEYS[9], 0, 0)
  if head[1] ~= user then
    break
  end
  if skip == '1' then
    redis.call('ZREM', KEYS[9], user)
    out[#out + 1] = user
    out[#out + 1] = ''
    out[#out + 1] = req
  else
    -- A hand-over's request id is new: no replay of it is in the database.
    local r = reserve(KEYS, {user, req, tok, ARGV[1], '0', '', '', ARGV[2], '1', '1'})
    if r[1] == 'ok' or r[1] == 'replay' then
      redis.call('ZREM', KEYS[9], user)
      out[#out + 1] = user
      out[#out + 1] = r[2]
      out[#out + 1] = req
    elseif r[1] == 'already' then
      redis.call('ZREM', KEYS[9], user)
      out[#out + 1] = user
      out[#out + 1] = ''
      out[#out + 1] = req
    else
      break
    end
  end
end
return out
