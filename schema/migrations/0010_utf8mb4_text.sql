-- User-visible text (a sale's title, an appeal's message) is utf8mb4 whatever
-- the server's default character set: MariaDB's own default is latin1, where
-- a title such as 秒杀 was refused. Converting only widens the two tables'
-- text columns; the previous release reads and writes them unchanged. Both
-- tables are small; the lock wait is bounded so that a long transaction
-- holding one fails this start (the next start retries) instead of queueing
-- every query of the table behind the conversion.
SET STATEMENT lock_wait_timeout = 10 FOR ALTER TABLE sales CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci;
SET STATEMENT lock_wait_timeout = 10 FOR ALTER TABLE appeals CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci;
