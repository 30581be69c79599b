-- MySQL 8 form of 0011_hold_arbitration: the same schema in the DDL MySQL 8 accepts.
-- The database decides every Redis hold before its 202 is sent.
-- live_user: one live (QUEUED, PENDING_PAYMENT) or paid reservation per
-- user and sale, whatever path or store took it. unit_bucket: the bucket
-- the hold's unit was taken from when the hold was recorded (NULL: the hold
-- took none yet, and its order takes one). redis_seq: the sale's Redis
-- hold counter at the hold; a Redis that went back in time (a failover to
-- a lagging replica, an AOF missing its tail) hands a number out again and
-- the unique key notices at once.
-- The columns are INVISIBLE: a process of the release before reads
-- reservations with SELECT r.* into a struct that has no field for them,
-- which its driver refuses; it keeps working beside this release.
-- A database holding two live reservations of one user for a sale fails
-- this migration: end one of them first.
ALTER TABLE reservations
  ADD COLUMN unit_bucket INT NULL INVISIBLE,
  ADD COLUMN redis_seq BIGINT NULL INVISIBLE,
  ADD COLUMN live_user BIGINT AS (IF(status IN ('QUEUED', 'PENDING_PAYMENT', 'PAID'), user_id, NULL)) STORED INVISIBLE,
  ADD UNIQUE KEY reservations_live_user (sale_id, live_user),
  ADD UNIQUE KEY reservations_redis_seq (sale_id, redis_seq);

-- Set when a hold found Redis behind the database (redis_seq seen before):
-- the worker rebuilds the sale in Redis from the database and clears it.
ALTER TABLE sales ADD COLUMN redis_went_back_at DATETIME(3) NULL INVISIBLE;

-- The hold record each process understands (domain.HoldRecordVersion): an
-- API records holds with their unit only while every worker seen lately
-- places such holds' orders; 0 is a release from before.
ALTER TABLE redis_observers ADD COLUMN hold_version INT NOT NULL DEFAULT 0;
