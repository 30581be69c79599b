-- Repair a drifted Redis stock from a database snapshot while holds come
-- and go. A unit is out of sale when Redis holds its token (held, ordered,
-- paid) or, for a token Redis does not know (lost with the last second of
-- an AOF), when the snapshot has it live. Redis's token states are newer
-- than the snapshot and win where they exist: a hold taken or placed since
-- the snapshot is held here, a release since is released here (its unit
-- back in the stock already). A release whose Redis step is still to come
-- is counted out of sale and its step then adds the unit.
-- Refused (-1) unless the sale is in Redis mode and every stock addition
-- Redis applied is in the snapshot's total; the snapshot's additions are
-- marked applied, so a late Redis step of one does not add it twice.
-- A withdrawal between its Redis and its database step (milliseconds) is
-- not seen: the stock is then too high until the next repair; the
-- database's conditional deduction still refuses the extra units.
-- KEYS: 1 stock, 2 tokens, 3 released counter, 4 applied additions (set), 5 meta
-- ARGV: 1 stock_total, 2 n (addition refs), 3..2+n refs, then the snapshot's live tokens
-- Returns {outcome, old stock, new stock}: 1 set, 0 already right, -1 refused.
if redis.call('HGET', KEYS[5], 'mode') ~= 'redis' then
  return {-1, -1, -1}
end
local stock = redis.call('GET', KEYS[1])
if not stock then
  return {-1, -1, -1}
end
stock = tonumber(stock)
local n = tonumber(ARGV[2])
local refs = {}
for i = 3, 2 + n do
  refs[ARGV[i]] = true
end
for _, ref in ipairs(redis.call('SMEMBERS', KEYS[4])) do
  if not refs[ref] then
    return {-1, stock, -1}
  end
end
local out = 0
local known = {}
local tokens = redis.call('HGETALL', KEYS[2])
for i = 1, #tokens, 2 do
  known[tokens[i]] = true
  if string.match(tokens[i + 1], '^(%a+):') ~= 'released' then
    out = out + 1
  end
end
for i = 3 + n, #ARGV do
  if not known[ARGV[i]] then
    out = out + 1
  end
end
local target = tonumber(ARGV[1]) - out
if target < 0 then
  return {-1, stock, target}
end
if target == stock then
  return {0, stock, target}
end
redis.call('SET', KEYS[1], target)
for i = 3, 2 + n do
  redis.call('SADD', KEYS[4], ARGV[i])
end
redis.call('INCR', KEYS[3])
return {1, stock, target}
