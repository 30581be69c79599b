-- Record a reservation's status as the order workflow advances it, for the
-- status reads (polls and event streams) that must not reach the database.
-- Status only moves forward, so a record never goes back to a lower rank
-- (a late or repeated writer loses). The record carries the sale's epoch:
-- a rebuild after a database-mode episode sets a new epoch, which makes
-- every older record invalid (status changes made meanwhile are not here).
-- Nothing is written for a sale whose keys are gone (torn down, lost).
-- A changed record is announced on the sale's event channel (a wake-up
-- only: readers re-read the record).
-- KEYS: 1 status hash, 2 meta
-- ARGV: 1 token, 2 rank, 3 record without its rank and epoch
--       ("user|status|order_no|amount_cents|pay_by_ms"), 4 event channel
-- Returns 1 when the record changed, 0 otherwise.
local epoch = redis.call('HGET', KEYS[2], 'epoch')
if not epoch then
  -- Still announced: a reader's cached view of the token is stale now.
  redis.call('PUBLISH', ARGV[4], ARGV[1])
  return 0
end
local rank = tonumber(ARGV[2])
local v = ARGV[2] .. '|' .. epoch .. '|' .. ARGV[3]
local old = redis.call('HGET', KEYS[1], ARGV[1])
if old then
  if old == v then
    return 0
  end
  local oldRank, oldEpoch = string.match(old, '^(%d+)|(%d+)|')
  if oldEpoch == epoch and tonumber(oldRank) > rank then
    return 0
  end
end
redis.call('HSET', KEYS[1], ARGV[1], v)
redis.call('PUBLISH', ARGV[4], ARGV[1])
return 1
