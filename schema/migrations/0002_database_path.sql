-- Units the database path may still sell while a sale is in database mode:
-- what Redis had unsold when last seen, so holds Redis already promised are
-- not sold again. NULL outside database mode.
ALTER TABLE sales ADD COLUMN db_quota BIGINT NULL;
