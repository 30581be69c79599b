-- When the database path may start selling after a switch (MySQL's clock):
-- every Redis hold sent before the switch has passed its deadline by then.
ALTER TABLE sales ADD COLUMN db_sell_after DATETIME(3) NULL;
