-- Each API instance's and worker's own view of Redis, refreshed every
-- second (fleet.Observer): a sale moves to the database path only when most
-- observers seen in the last few seconds find Redis down. Rows of processes
-- gone are swept after an hour.
CREATE TABLE redis_observers (
  observer VARCHAR(128) NOT NULL PRIMARY KEY,
  role VARCHAR(16) NOT NULL,
  redis_up BOOLEAN NOT NULL,
  seen_at DATETIME(3) NOT NULL,
  KEY redis_observers_seen (seen_at)
) ENGINE=InnoDB;
