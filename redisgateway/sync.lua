-- Have a token's Redis state follow the database in one call: its step
-- (advance.lua or release.lua), then its status record (status.lua), so
-- the record never lags the state it describes. The caller prepends the
-- step and status.lua as the functions step(KEYS, ARGV) and
-- status(KEYS, ARGV) (see sync.go).
-- KEYS: 1 status hash, 2 meta, 3.. the step's keys
-- ARGV: 1-4 status.lua's arguments, 5.. the step's
-- Returns the step's answer.
local changed = step({unpack(KEYS, 3)}, {unpack(ARGV, 5)})
status({KEYS[1], KEYS[2]}, {ARGV[1], ARGV[2], ARGV[3], ARGV[4]})
return changed
