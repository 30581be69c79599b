-- When the sale last changed mode: a resync that stalls (its instance died)
-- is rolled back to database mode after a bound.
ALTER TABLE sales ADD COLUMN mode_changed_at DATETIME(3) NULL;
