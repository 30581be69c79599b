-- MySQL 8 form of 0010: MySQL has no SET STATEMENT, so the lock wait bound
-- is the session's, set for the two statements and put back after.
SET SESSION lock_wait_timeout = 10;
ALTER TABLE sales CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci;
ALTER TABLE appeals CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci;
SET SESSION lock_wait_timeout = DEFAULT;
