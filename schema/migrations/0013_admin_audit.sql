-- Every admin write that succeeded, with the operator who made it: the
-- identity provider's sub of an operator's token, or secret:<user id> for
-- a token of the shared admin secret. Written right after the write
-- commits (the writes span the database and Redis, so not in their
-- transaction); kept until removed by hand. utf8mb4 whatever the server's
-- default: a subject may be any text.
CREATE TABLE IF NOT EXISTS admin_audit (
  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  operator VARCHAR(255) NOT NULL,
  action VARCHAR(64) NOT NULL,
  sale_id BIGINT NULL,
  summary VARCHAR(512) NOT NULL,
  status SMALLINT NOT NULL,
  request_id VARCHAR(64) NOT NULL,
  at DATETIME(3) NOT NULL,
  KEY admin_audit_sale (sale_id, id),
  KEY admin_audit_operator (operator, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;
