-- MySQL 8 form of 0001_init: the same schema in the DDL MySQL 8 accepts.
-- Sales, their stock buckets, reservations, orders and the stock ledger.
CREATE TABLE sales (
  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  goods_id BIGINT NOT NULL,
  title VARCHAR(200) NOT NULL,
  price_cents BIGINT NOT NULL,
  stock_total BIGINT NOT NULL,
  buckets INT NOT NULL,
  starts_at DATETIME(3) NOT NULL,
  ends_at DATETIME(3) NOT NULL,
  payment_window_seconds INT NOT NULL,
  per_user_limit INT NOT NULL DEFAULT 1,
  control VARCHAR(16) NOT NULL DEFAULT 'active',
  mode VARCHAR(16) NOT NULL DEFAULT 'redis',
  mode_epoch BIGINT NOT NULL DEFAULT 1,
  -- Redis stock as the worker last saw it, and when (database path cap).
  redis_stock_seen BIGINT NULL,
  redis_stock_seen_at DATETIME(3) NULL,
  warmed_at DATETIME(3) NULL,
  finished_at DATETIME(3) NULL,
  created_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  KEY sales_goods (goods_id)
) ENGINE=InnoDB;

-- N rows per sale spread the row lock of the stock deduction.
CREATE TABLE stock_buckets (
  sale_id BIGINT NOT NULL,
  bucket_no INT NOT NULL,
  stock BIGINT NOT NULL,
  PRIMARY KEY (sale_id, bucket_no),
  CONSTRAINT stock_nonnegative CHECK (stock >= 0)
) ENGINE=InnoDB;

-- Every reservation keeps a row, FAILED ones too. (sale, user, request_id)
-- is the replay mapping of the database path.
CREATE TABLE reservations (
  token VARCHAR(64) NOT NULL PRIMARY KEY,
  sale_id BIGINT NOT NULL,
  user_id BIGINT NOT NULL,
  request_id VARCHAR(64) NOT NULL,
  path VARCHAR(16) NOT NULL,
  status VARCHAR(20) NOT NULL,
  order_no CHAR(26) NULL,
  amount_cents BIGINT NOT NULL DEFAULT 0,
  pay_by DATETIME(3) NULL,
  payment_ref VARCHAR(64) NULL,
  fail_reason VARCHAR(200) NULL,
  created_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  updated_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  UNIQUE KEY reservations_request (sale_id, user_id, request_id),
  KEY reservations_user (user_id, created_at),
  KEY reservations_sale_status (sale_id, status)
) ENGINE=InnoDB;

-- One order per token; at most one live or paid order per user and sale:
-- live_user is the user id only while the order is live or paid, so expired
-- and cancelled orders (NULL) do not block a new purchase.
CREATE TABLE orders (
  order_no CHAR(26) NOT NULL PRIMARY KEY,
  token VARCHAR(64) NOT NULL,
  sale_id BIGINT NOT NULL,
  user_id BIGINT NOT NULL,
  amount_cents BIGINT NOT NULL,
  status VARCHAR(20) NOT NULL,
  bucket_no INT NOT NULL,
  pay_by DATETIME(3) NOT NULL,
  payment_ref VARCHAR(64) NULL,
  created_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  updated_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  live_user BIGINT AS (IF(status IN ('PENDING_PAYMENT', 'PAID'), user_id, NULL)) STORED,
  UNIQUE KEY orders_token (token),
  UNIQUE KEY orders_live_user (sale_id, live_user),
  KEY orders_sale_status (sale_id, status)
) ENGINE=InnoDB;

-- Every stock movement, unique per (token, operation): a retry that finds
-- its row returns the earlier result instead of moving stock again.
CREATE TABLE stock_ledger (
  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  token VARCHAR(64) NOT NULL,
  operation VARCHAR(16) NOT NULL,
  sale_id BIGINT NOT NULL,
  bucket_no INT NOT NULL,
  delta INT NOT NULL,
  created_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  UNIQUE KEY ledger_token_op (token, operation),
  KEY ledger_sale (sale_id, bucket_no)
) ENGINE=InnoDB;

-- Workflows the database path still has to start (transactional outbox).
CREATE TABLE outbox (
  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  token VARCHAR(64) NOT NULL,
  sale_id BIGINT NOT NULL,
  created_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  dispatched_at DATETIME(3) NULL,
  UNIQUE KEY outbox_token (token),
  KEY outbox_pending (dispatched_at, id)
) ENGINE=InnoDB;

CREATE TABLE blacklist (
  user_id BIGINT NOT NULL PRIMARY KEY,
  created_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3)
) ENGINE=InnoDB;

CREATE TABLE reconciliation_reports (
  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  sale_id BIGINT NOT NULL,
  consistent BOOLEAN NOT NULL,
  final BOOLEAN NOT NULL DEFAULT FALSE,
  report JSON NOT NULL,
  created_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  KEY reports_sale (sale_id, id)
) ENGINE=InnoDB;
