-- The database path's quota per bucket (issue 20): taken with the bucket's
-- stock in one conditional update, so no reservation waits for the sale
-- row. NULL until the quota opens after a switch; sales.db_quota then holds
-- the quota as opened (the total), no longer the count left.
ALTER TABLE stock_buckets ADD COLUMN db_quota BIGINT NULL;
