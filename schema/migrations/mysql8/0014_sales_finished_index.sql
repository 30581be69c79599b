-- MySQL 8 form of 0014_sales_finished_index: the same schema in the DDL MySQL 8 accepts.
-- Ended sales accumulate (thousands a day) and stay: the open sales every
-- API instance and worker loop reads each second or few (finished_at IS
-- NULL), and the sales retired lately that the worker's retirer sweeps
-- (finished_at >= ?), are found through this index instead of a scan of
-- every sale ever held.
ALTER TABLE sales ADD INDEX sales_finished (finished_at);
