-- Each process reading from a replica (MYSQL_READ_DSN) writes its own row
-- here on the primary every second, stamped by its own clock in unix
-- nanoseconds, and reads it back from the replica: the newest stamp the
-- replica holds is how far it has applied the primary's commits
-- (store.Replica). Rows of processes gone are swept after an hour.
CREATE TABLE IF NOT EXISTS replica_heartbeats (
  process VARCHAR(128) NOT NULL PRIMARY KEY,
  beat_ns BIGINT NOT NULL,
  KEY replica_heartbeats_beat (beat_ns)
) ENGINE=InnoDB;
