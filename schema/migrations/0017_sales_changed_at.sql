-- When the sale's row last changed, kept by the server on every UPDATE
-- that changes a value: each process's directory of open sales
-- (store.OpenSales) re-reads only the rows changed since its last read,
-- through the index, instead of every open sale each second. The Redis
-- stock sample (store.RecordRedisStock) keeps it as it was: a sample is
-- no change of the sale. Invisible, so no SELECT * or INSERT of a release
-- before it meets it.
ALTER TABLE sales
  ADD COLUMN IF NOT EXISTS changed_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3) INVISIBLE,
  ADD INDEX IF NOT EXISTS sales_changed (changed_at);
