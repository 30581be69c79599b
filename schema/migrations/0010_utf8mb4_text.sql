-- User-visible text (a sale's title, an appeal's message) is utf8mb4 whatever
-- the server's default character set: MariaDB's own default is latin1, where
-- a title such as 秒杀 was refused. Converting only widens the two tables'
-- text columns; the previous release reads and writes them unchanged.
ALTER TABLE sales CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci;
ALTER TABLE appeals CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci;
