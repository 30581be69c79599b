-- Read everything reconciliation needs of a sale's Redis state at one
-- instant: Redis runs the script without interleaving.
-- KEYS: 1 stock, 2 buyers, 3 tokens, 4 inbox, 5 dead, 6 released, 7 reserved,
--       8 status records, 9 meta
-- ARGV: 1 consumer group, 2 idle ms after which a pending entry is stale
-- Returns {stock or -1, buyers, tokens (flat field/value list), pending,
--          undelivered-or--1, dead, released, reserved, stale pending (max 1000),
--          status records' ranks of the current epoch (flat token/rank list),
--          the tokens of the entries not acknowledged yet (undelivered or
--          pending), or false when they are unknown or more than 1000 each}.
local stock = redis.call('GET', KEYS[1])
local buyers = redis.call('SMEMBERS', KEYS[2])
local tokens = redis.call('HGETALL', KEYS[3])
local pending = 0
local lag = -1
local stale = 0
local waiting = {}
-- known: waiting lists every entry not acknowledged (none without an inbox).
local known = true
local function wait(entry)
  local f = entry[2]
  for i = 1, #f, 2 do
    if f[i] == 'token' then
      waiting[#waiting + 1] = f[i + 1]
      return
    end
  end
end
if redis.call('EXISTS', KEYS[4]) == 1 then
  known = false
  local ok, summary = pcall(redis.call, 'XPENDING', KEYS[4], ARGV[1])
  if ok then
    pending = summary[1]
  end
  local oks, old = pcall(redis.call, 'XPENDING', KEYS[4], ARGV[1], 'IDLE', tonumber(ARGV[2]), '-', '+', 1000)
  if oks then
    stale = #old
  end
  local okg, groups = pcall(redis.call, 'XINFO', 'GROUPS', KEYS[4])
  if okg then
    for _, g in ipairs(groups) do
      local name, last
      for i = 1, #g, 2 do
        if g[i] == 'name' then name = g[i + 1] end
        if g[i] == 'last-delivered-id' then last = g[i + 1] end
      end
      -- The entries after the group's last delivered one, counted: the
      -- group's own lag is unknown, or stays behind, once entries were
      -- trimmed or deleted before delivery.
      if name == ARGV[1] and last then
        local after = redis.call('XRANGE', KEYS[4], '(' .. last, '+', 'COUNT', 1000)
        lag = #after
        for _, e in ipairs(after) do wait(e) end
        known = lag < 1000
      end
    end
  end
  -- The pending entries' tokens too: delivered is not yet handed on.
  local okp, delivered = pcall(redis.call, 'XPENDING', KEYS[4], ARGV[1], '-', '+', 1000)
  if known and okp and #delivered < 1000 then
    for _, p in ipairs(delivered) do
      local e = redis.call('XRANGE', KEYS[4], p[1], p[1])
      if e[1] then wait(e[1]) end
    end
  else
    known = false
  end
end
local dead = redis.call('XLEN', KEYS[5])
local epoch = redis.call('HGET', KEYS[9], 'epoch')
local ranks = {}
if epoch then
  local records = redis.call('HGETALL', KEYS[8])
  for i = 1, #records, 2 do
    local rank, e = string.match(records[i + 1], '^(%d+)|(%d+)|')
    if e == epoch then
      ranks[#ranks + 1] = records[i]
      ranks[#ranks + 1] = rank
    end
  end
end
return {tonumber(stock or '-1'), buyers, tokens, pending, lag, dead,
        tonumber(redis.call('GET', KEYS[6]) or '0'), tonumber(redis.call('GET', KEYS[7]) or '0'), stale, ranks,
        known and waiting}
