-- Payments the provider confirmed for reservations that had already ended
-- (or were paid already): money to give back, never a sale. A provider's
-- retry of the same payment finds its row: (token, payment_ref) is unique.
CREATE TABLE refunds (
  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  token VARCHAR(64) NOT NULL,
  sale_id BIGINT NOT NULL,
  user_id BIGINT NOT NULL,
  payment_ref VARCHAR(64) NOT NULL,
  amount_cents BIGINT NOT NULL,
  reason VARCHAR(32) NOT NULL,
  created_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  UNIQUE KEY refunds_payment (token, payment_ref),
  KEY refunds_sale (sale_id, id)
) ENGINE=InnoDB;
