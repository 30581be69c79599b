-- MySQL 8 form of 0009_gate: the same schema in the DDL MySQL 8 accepts.
-- The gate before the stock script: a proof-of-work challenge per sale,
-- sale allowlists, challenge exemptions and appeals (contract 1.2).
ALTER TABLE sales
  ADD COLUMN challenge_difficulty BIGINT NOT NULL DEFAULT 0,
  ADD COLUMN restricted TINYINT(1) NOT NULL DEFAULT 0,
  -- Bumped by every allowlist change, so instances reload a list only
  -- when it moved; 0: the sale never had one.
  ADD COLUMN allowlist_version BIGINT NOT NULL DEFAULT 0;

CREATE TABLE IF NOT EXISTS sale_allowlist (
  sale_id BIGINT NOT NULL,
  user_id BIGINT NOT NULL,
  PRIMARY KEY (sale_id, user_id)
) ENGINE=InnoDB;

CREATE TABLE IF NOT EXISTS challenge_exemptions (
  user_id BIGINT NOT NULL PRIMARY KEY,
  created_at DATETIME(3) NOT NULL
) ENGINE=InnoDB;

-- A solved challenge is redeemed once: its challenge hash is kept until it
-- expires, then swept.
CREATE TABLE IF NOT EXISTS challenge_redemptions (
  challenge CHAR(64) NOT NULL PRIMARY KEY,
  expires_at DATETIME(3) NOT NULL,
  KEY challenge_redemptions_expiry (expires_at)
) ENGINE=InnoDB;

-- open_user is the user id while the appeal is open (NULL once closed), so
-- the unique key allows one open appeal per user and sale.
CREATE TABLE IF NOT EXISTS appeals (
  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  user_id BIGINT NOT NULL,
  sale_id BIGINT NOT NULL,
  reason VARCHAR(16) NOT NULL,
  message VARCHAR(2000) NOT NULL,
  state VARCHAR(16) NOT NULL,
  open_user BIGINT NULL,
  resolved_by BIGINT NULL,
  action VARCHAR(16) NULL,
  created_at DATETIME(3) NOT NULL,
  resolved_at DATETIME(3) NULL,
  UNIQUE KEY appeals_one_open (open_user, sale_id),
  KEY appeals_state (state, id)
) ENGINE=InnoDB;
