-- Every waitlist join answered 200, with its join number (Redis's, see
-- lua/waitlist_join.lua): a Redis that loses the join (a failover, an AOF
-- missing its tail, the sale's keys lost) gets it back, at its place, when
-- the sale is rebuilt. A leave deletes the row; a join served by a hand-over
-- is the reservation whose request id names its number.
CREATE TABLE IF NOT EXISTS waitlist_joins (
  sale_id BIGINT NOT NULL,
  user_id BIGINT NOT NULL,
  joined BIGINT NOT NULL,
  created_at DATETIME(3) NOT NULL,
  PRIMARY KEY (sale_id, user_id)
) ENGINE=InnoDB;
