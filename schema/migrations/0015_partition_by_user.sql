-- contract: the single-table unique keys of reservations and orders (token, order number, one live row per user and sale, Redis hold number), rebuilt to hold across the partitions; the previous release's statements meet the same rules under the same key names (see docs/deploy.md "Partitioning")
-- Reservations and orders are partitioned by user_id (HASH: user_id MOD 16), so a
-- user's reservations ("my reservations") are read from one partition.
-- Every unique key of a partitioned table must contain user_id, so:
--  - one live row per user and sale: (sale_id, live_user, user_id), the
--    same rule, as live_user is user_id or NULL;
--  - the rules that span users live in two small unpartitioned tables that
--    a trigger fills in the row's own statement (an insert that breaks one
--    fails whole): reservation_keys (a token once, and a Redis hold number
--    once per sale; a token's user_id, so a read by token finds its
--    partition in one primary-key lookup) and order_keys (an order number
--    once, a token's order once). A reservation whose key row is there
--    already (same token and user) writes none: the row's own primary key
--    refuses it as before, so an INSERT IGNORE of a replay is ignored.
CREATE TABLE IF NOT EXISTS reservation_keys (
  token VARCHAR(64) NOT NULL PRIMARY KEY,
  sale_id BIGINT NOT NULL,
  user_id BIGINT NOT NULL,
  redis_seq BIGINT NULL,
  UNIQUE KEY reservations_redis_seq (sale_id, redis_seq)
) ENGINE=InnoDB;

CREATE TABLE IF NOT EXISTS order_keys (
  order_no CHAR(26) NOT NULL PRIMARY KEY,
  token VARCHAR(64) NOT NULL,
  user_id BIGINT NOT NULL,
  UNIQUE KEY orders_token (token)
) ENGINE=InnoDB;

-- The triggers first, then the rows already there: a row written between
-- the two is in the key table once (the copy skips it).
CREATE TRIGGER IF NOT EXISTS reservations_keys BEFORE INSERT ON reservations FOR EACH ROW BEGIN IF NOT EXISTS (SELECT 1 FROM reservation_keys WHERE token = NEW.token AND user_id = NEW.user_id) THEN INSERT INTO reservation_keys (token, sale_id, user_id, redis_seq) VALUES (NEW.token, NEW.sale_id, NEW.user_id, NEW.redis_seq); END IF; END;
CREATE TRIGGER IF NOT EXISTS orders_keys BEFORE INSERT ON orders FOR EACH ROW INSERT INTO order_keys (order_no, token, user_id) VALUES (NEW.order_no, NEW.token, NEW.user_id);
INSERT IGNORE INTO reservation_keys (token, sale_id, user_id, redis_seq) SELECT token, sale_id, user_id, redis_seq FROM reservations;
INSERT IGNORE INTO order_keys (order_no, token, user_id) SELECT order_no, token, user_id FROM orders;

-- Each ALTER copies its table (ALGORITHM=COPY): writes to it wait until
-- the copy ends (docs/deploy.md "Partitioning"). Each is atomic, and a
-- rerun after a stop between them redoes the first harmlessly.
ALTER TABLE reservations
  DROP PRIMARY KEY,
  ADD PRIMARY KEY (token, user_id),
  DROP INDEX IF EXISTS reservations_live_user,
  ADD UNIQUE KEY reservations_live_user (sale_id, live_user, user_id),
  DROP INDEX IF EXISTS reservations_redis_seq
  PARTITION BY HASH (user_id) PARTITIONS 16;

ALTER TABLE orders
  DROP PRIMARY KEY,
  ADD PRIMARY KEY (order_no, user_id),
  DROP INDEX IF EXISTS orders_token,
  ADD UNIQUE KEY orders_token (token, user_id),
  DROP INDEX IF EXISTS orders_live_user,
  ADD UNIQUE KEY orders_live_user (sale_id, live_user, user_id)
  PARTITION BY HASH (user_id) PARTITIONS 16;
