-- Write a sale's control (pause, resume, stop) into its metadata, only
-- when the sale is warmed, so it never creates half a sale.
-- KEYS: 1 meta
-- ARGV: 1 control
-- An unchanged control is not written again (nothing replicated, no
-- change noted), so the worker can repeat the database's control.
-- Returns 2 when written, 1 when already so, 0 when the sale is not in
-- Redis.
if redis.call('EXISTS', KEYS[1]) == 1 then
  if redis.call('HGET', KEYS[1], 'control') ~= ARGV[1] then
    redis.call('HSET', KEYS[1], 'control', ARGV[1])
    return 2
  end
  return 1
end
return 0
