-- Admin writes' Idempotency-Key answers: one row per (admin, route, key),
-- hashed into scope. status is NULL while the first request is in flight;
-- rows are swept once older than the keep period (at least 24 h).
CREATE TABLE idempotency_keys (
  scope BINARY(32) NOT NULL PRIMARY KEY,
  body_hash BINARY(32) NOT NULL,
  status SMALLINT NULL,
  response MEDIUMBLOB NULL,
  created_at DATETIME(3) NOT NULL,
  KEY idempotency_created (created_at)
) ENGINE=InnoDB;

-- Stock additions the database committed and Redis has not taken yet:
-- written in the addition's transaction, deleted once Redis applied the
-- ref (adjust.lua applies each ref once), so Redis follows by itself.
CREATE TABLE stock_redis_pending (
  ref VARCHAR(64) NOT NULL PRIMARY KEY,
  sale_id BIGINT NOT NULL,
  delta BIGINT NOT NULL,
  created_at DATETIME(3) NOT NULL,
  KEY stock_pending_sale (sale_id)
) ENGINE=InnoDB;
