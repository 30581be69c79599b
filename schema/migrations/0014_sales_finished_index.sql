-- Ended sales accumulate (thousands a day) and stay: the open sales every
-- API instance and worker loop reads each second or few (finished_at IS
-- NULL), and the sales retired lately that the worker's retirer sweeps
-- (finished_at >= ?), are found through this index instead of a scan of
-- every sale ever held.
ALTER TABLE sales ADD INDEX IF NOT EXISTS sales_finished (finished_at);
